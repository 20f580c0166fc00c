"""PathNet (Fernando et al. 2017), as the HAT paper runs it: modules per layer, paths found by a tournament.

- `approach.py`: the `PathNetApproach` (the tournament of paths, training the chosen path, freezing its modules
  after each task);
- `network.py`: the network of modules, and the layer plans of the spec's bodies that PNN's network reuses.

This file imports nothing; `PathNetApproach` (registered as `clbench.approaches.pathnet:PathNetApproach`) and
`PathNetHyperparameters` come from `approach.py` on first use, and `PathNetApproach` names this package as its
module, as when PathNet was one file.
"""

from __future__ import annotations

from clbench.approaches import lazy_exports

__all__ = ["PathNetApproach", "PathNetHyperparameters"]

__getattr__ = lazy_exports(__name__, "approach", __all__)
