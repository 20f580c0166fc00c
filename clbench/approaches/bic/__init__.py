"""BiC, bias correction (Wu, Chen, Wang, Ye, Liu, Guo & Fu, CVPR 2019, "Large Scale Incremental Learning").

- `approach.py`: the `BiC` approach (the memory split into training and held-out exemplars, the distillation loss,
  the bias layers fitted after each task, exemplar selection);
- `functions.py`: its mathematics as small pure functions on tensors (the bias layers, the distillation term, the
  fit of one task's alpha and beta on held-out logits, the memory's split).

A folder rather than a file in `replay/`: besides the memory the method has its own pieces of network (one
two-parameter bias layer per task) and their fit, a stage of its own after training. This file imports nothing;
`BiC` is registered as `clbench.approaches.bic.approach:BiC`.
"""
