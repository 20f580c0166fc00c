"""PackNet: adding multiple tasks to a single network by iterative pruning (Mallya & Lazebnik, CVPR 2018).

- `approach.py`: the `PackNet` approach (train, prune, retrain the kept weights; earlier tasks' weights frozen
  and masked out for them);
- `pruning.py`: weight ownership and magnitude pruning as small tensor functions;
- `report.py`: its monitoring table for `clbench report --monitoring` (torch-free).

This file imports nothing, so that `report.py` is imported without torch; `PackNet` is registered as
`clbench.approaches.packnet.approach:PackNet`.
"""
