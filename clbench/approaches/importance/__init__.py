"""Importance-weighted quadratic penalties: SI (Zenke, Poole & Ganguli, ICML 2017) and MAS (Aljundi et al.,
ECCV 2018), which differ only in how a weight's importance Omega is estimated.

- `si.py`, `mas.py`: the two approaches (registered as `clbench.approaches.importance.si:SI` and
  `clbench.approaches.importance.mas:MAS`);
- `penalty.py`: what they share (`ImportancePenalty`: the anchor, the accumulated Omega, the penalty, the
  `penalty_stiffness` monitoring);
- `functions.py`: the mathematics as small pure functions on tensors (SI's path integral, MAS's gradient
  magnitudes, the penalty and its SGD stiffness);
- `report.py`: their monitoring section for `clbench report --monitoring` (torch-free; this file imports nothing).
"""
