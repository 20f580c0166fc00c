"""Packaging glue that pyproject.toml cannot express: the top-level `benchmarks/` folder ships as `clbench.benchmarks`.

Everything else (metadata, dependencies, package data) is in pyproject.toml. `packages` is computed here because
setuptools' `packages.find` cannot add a package mapped from another folder to the ones it finds.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["clbench", "clbench.*"]), "clbench.benchmarks"],
    package_dir={"clbench.benchmarks": "benchmarks"},
)
