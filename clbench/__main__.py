from clbench.cli import main

main()
