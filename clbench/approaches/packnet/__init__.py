"""PackNet: adding multiple tasks to a single network by iterative pruning (Mallya & Lazebnik, CVPR 2018).

- `approach.py`: the `PackNet` approach (train, prune, retrain the kept weights; earlier tasks' weights frozen
  and masked out for them);
- `pruning.py`: weight ownership and magnitude pruning as small tensor functions;
- `report.py`: its monitoring table for `clbench report --monitoring` (torch-free).

This file imports nothing (so `report.py` is imported without torch); `PackNet` (registered as
`clbench.approaches.packnet:PackNet`) and `PackNetHyperparameters` come from `approach.py` on first use, and
`PackNet` names this package as its module, as when PackNet was one file.
"""

from __future__ import annotations

from clbench.approaches import lazy_exports

__all__ = ["PackNet", "PackNetHyperparameters"]

__getattr__ = lazy_exports(__name__, "approach", __all__)
