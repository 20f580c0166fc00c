from clbench.cli import console_main

console_main()
