"""clbench: trustworthy, comparable numbers on catastrophic forgetting (HAT, Serra et al., ICML 2018)."""

__version__ = "0.1.0"
