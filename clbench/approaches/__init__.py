"""Approaches: one module each, registered by name. Importing this package registers them all."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import clbench.approaches.ewc  # noqa: F401  (registration)
import clbench.approaches.hat  # noqa: F401  (registration)
import clbench.approaches.imm  # noqa: F401  (registration)
import clbench.approaches.lfl  # noqa: F401  (registration)
import clbench.approaches.lwf  # noqa: F401  (registration)
import clbench.approaches.mas  # noqa: F401  (registration)
import clbench.approaches.packnet  # noqa: F401  (registration)
import clbench.approaches.pathnet  # noqa: F401  (registration)
import clbench.approaches.pnn  # noqa: F401  (registration)
import clbench.approaches.si  # noqa: F401  (registration)
from clbench.approaches import joint, random_classifier, sgd, sgd_frozen  # noqa: F401  (registration)
from clbench.approaches.base import REGISTRY, Approach, ApproachContext, Hyperparameters
from clbench.config import build, to_dict
from clbench.errors import SpecError
from clbench.spec import BenchmarkSpec, TrainingSpec

__all__ = ["REGISTRY", "Approach", "ApproachContext", "Hyperparameters", "ResolvedApproach", "resolve",
           "approach_names"]


def approach_names() -> list[str]:
    """Registered approach names, sorted."""
    return sorted(REGISTRY)


@dataclass(frozen=True)
class ResolvedApproach:
    """An approach class with its validated hyper-parameters and its effective training protocol."""

    cls: type[Approach]
    hyperparameters: Hyperparameters
    training: TrainingSpec

    @property
    def name(self) -> str:
        return self.cls.name

    def config(self) -> dict[str, Any]:
        return {"hyperparameters": to_dict(self.hyperparameters), "training": to_dict(self.training)}


def lookup(method: str) -> type[Approach]:
    """The approach class registered as `method`; an unknown name lists the valid ones."""
    if method not in REGISTRY:
        raise SpecError(f"unknown method {method!r}; valid methods: {', '.join(approach_names())}")
    return REGISTRY[method]


def resolve(spec: BenchmarkSpec, method: str) -> ResolvedApproach:
    """Validate the spec's section for `method` (its `training` sub-section overrides the protocol)."""
    cls = lookup(method)
    section = spec.approach_section(method)
    training_overrides = section.pop("training", None) or {}
    where = f"approaches.{method}"
    hyperparameters = build(cls.hyperparameters_class, section, where=where, source=spec.source)
    merged = {**to_dict(spec.training), **training_overrides}
    training = build(TrainingSpec, merged, where=f"{where}.training", source=spec.source)
    return ResolvedApproach(cls, hyperparameters, replace(training))
