"""clbench: trustworthy, comparable numbers on catastrophic forgetting (HAT, Serra et al., ICML 2018)."""

# The one place the version is written: pyproject.toml reads it from here (`[tool.setuptools.dynamic]`, from the
# text, without importing clbench), so a wheel's metadata and `clbench.__version__` cannot disagree.
__version__ = "0.1.0"
