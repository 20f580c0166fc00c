"""HAT, hard attention to the task (Serra, Suris, Miron & Karatzoglou, ICML 2018): everything of the method.

- `approach.py`: the `Hat` approach (the hooks: annealing, the attention regulariser, gradient masks and
  embedding compensation, the masks kept after each task, monitoring tables);
- `functions.py`: its mathematics as small pure functions on tensors;
- `network.py`: the HAT-gated MLP and AlexNet-like conv net;
- `report.py`: its monitoring tables for `clbench report --hat` / `--monitoring` (torch-free);
- `figures.py`: their figures (`--plot`).

This file imports nothing, so that `report.py` is imported without torch; `Hat` is registered as
`clbench.approaches.hat.approach:Hat`.
"""
