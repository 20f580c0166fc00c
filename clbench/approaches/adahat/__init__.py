"""AdaHAT, adaptive hard attention to the task (Wang, Bo, Hong, Liu & Mu, ECML-PKDD 2024): HAT's masks with an
adaptive gradient adjustment instead of HAT's hard gradient mask.

- `approach.py`: the `AdaHat` approach, a `clbench.approaches.hat.approach.Hat` whose gradient conditioning is
  AdaHAT's adjustment rate (everything else, masks, annealing, regulariser, compensation, monitoring, is HAT's);
- `functions.py`: its mathematics (summative mask, parameter importance, network sparsity, adjustment rate) as
  small pure functions on tensors.

Its monitoring tables and report are HAT's (`clbench.approaches.hat.report:HatReporter`). This file imports
nothing; `AdaHat` is registered as `clbench.approaches.adahat.approach:AdaHat`.
"""
