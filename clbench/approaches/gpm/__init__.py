"""GPM, Gradient Projection Memory (Saha, Garg & Roy, ICLR 2021): everything of the method.

- `approach.py`: the `GPM` approach (representations after each task, bases kept, gradients projected);
- `functions.py`: its mathematics as small pure functions on tensors (basis update, projection, unfolded patches);
- `report.py`: its monitoring table for `clbench report --monitoring` (torch-free).

This file imports nothing, so that `report.py` is imported without torch; `GPM` is registered as
`clbench.approaches.gpm.approach:GPM`.
"""
