"""Progressive neural networks (Rusu et al. 2016): one column per task with lateral adapters.

- `approach.py`: the `ProgressiveNetworks` approach (a new column per task, earlier columns frozen), registered
  as `clbench.approaches.pnn.approach:ProgressiveNetworks`;
- `network.py`: the columns and their lateral adapters (on PathNet's layer plans, `clbench.approaches.pathnet`).
"""
