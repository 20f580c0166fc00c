"""PathNet (Fernando et al. 2017), as the HAT paper runs it: modules per layer, paths found by a tournament.

- `approach.py`: the `PathNetApproach` (the tournament of paths, training the chosen path, freezing its modules
  after each task), registered as `clbench.approaches.pathnet.approach:PathNetApproach`;
- `network.py`: the network of modules, and the layer plans of the spec's bodies that PNN's network reuses.
"""
