"""Progressive neural networks (Rusu et al. 2016): one column per task with lateral adapters.

- `approach.py`: the `ProgressiveNetworks` approach (a new column per task, earlier columns frozen);
- `network.py`: the columns and their lateral adapters (on PathNet's layer plans, `clbench.approaches.pathnet`).

This file imports nothing; `ProgressiveNetworks` (registered as `clbench.approaches.pnn:ProgressiveNetworks`) and
`PNNHyperparameters` come from `approach.py` on first use, and `ProgressiveNetworks` names this package as its
module, as when PNN was one file.
"""

from __future__ import annotations

from clbench.approaches import lazy_exports

__all__ = ["PNNHyperparameters", "ProgressiveNetworks"]

__getattr__ = lazy_exports(__name__, "approach", __all__)
