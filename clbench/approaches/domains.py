"""Every hyper-parameter's domain, checked before any work: the one rule that `train`, `tune`, `spec` and `list` share.

A value is checked in two steps, both when a spec's approach section is resolved
(`clbench.approaches.resolution`), before any data is read or any run folder made:

- alone, against its field's declared domain (`clbench.spec.fields.field`: `minimum`, `maximum`, `above`, `below`,
  `choices`, `min_items`, `special` values), by `clbench.spec.fields.build`;
- against the other fields and the benchmark, by the approach's hook `Approach.hyperparameter_problem(hyperparameters,
  facts)`: `facts` (`BenchmarkFacts`) are what the spec says about the tasks without reading their images (classes
  per task, input size, the fewest training images of a task, the body), and the hook returns a `DomainProblem`
  (the key and why, saying what is allowed) or None. `memory_problem` refuses a size whose memory cannot be
  allocated on this machine.

A problem is one line, `<where the value came from>: approach M: `approaches.M.KEY` is VALUE; why` (`domain_refusal`):
a SpecError (exit 2) when the spec or an option gave the value, else (an approach's default that does not fit the
benchmark, e.g. a memory of 200 over mixture8's 293 classes) a refusal of the approach on that benchmark, which
`list` and `spec` show and `train` and `tune` refuse with (`clbench.approaches.resolution`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields, is_dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from clbench.approaches.refusals import Refusal
from clbench.errors import ClbenchError
from clbench.spec import BenchmarkSpec, NetworkSpec

if TYPE_CHECKING:
    from clbench.approaches.base import Approach
    from clbench.approaches.datatypes import Hyperparameters

FLOAT_BYTES = 4  # float32: weights, scores, normalised inputs, stored logits
INDEX_BYTES = 8  # int64: a stored sample's label and task id


@dataclass(frozen=True)
class DomainProblem:
    """Why a hyper-parameter's value cannot be run: its key (within the approach's section) and the reason, which
    says what is allowed."""

    key: str  # `k`, `buffer_size`, ... (dotted below a section)
    reason: str


@dataclass(frozen=True)
class BenchmarkFacts:
    """What a benchmark's spec says about its tasks before any image is read (the facts a hyper-parameter is checked
    against). The lazy ones read only what they need: a spec's own data sets' class folders or label arrays."""

    spec: BenchmarkSpec

    @property
    def network(self) -> NetworkSpec:
        return self.spec.network

    @property
    def scenario(self) -> str:
        return self.spec.data.scenario

    @cached_property
    def head_sizes(self) -> tuple[int, ...]:
        """Classes per task, in the canonical task order."""
        from clbench.data.custom import n_classes_lookup
        from clbench.data.tasks import head_sizes_for

        return head_sizes_for(self.spec.data, n_classes_lookup(self.spec))

    @property
    def n_classes(self) -> int:
        """Classes over every task (the outputs of the class scenario)."""
        return sum(self.head_sizes)

    @cached_property
    def input_size(self) -> int:
        """Numbers in one input (784 for mnist28, 3 x 32 x 32 for image32)."""
        from clbench.data.tasks import input_shape_for

        return math.prod(input_shape_for(self.spec.data))

    @cached_property
    def fewest_training_samples(self) -> int | None:
        """The fewest training images of a task after the validation hold-out (`data.max_train_samples` caps it), as
        the spec says for the built-in data sets (the paper's sizes, classes taken as balanced); None for a spec's
        own data sets (their tasks are checked when the run starts)."""
        from clbench.spec.catalogue import CATALOGUE
        from clbench.spec.data_checks import validation_count

        data = self.spec.data
        if not set(data.datasets) <= set(CATALOGUE):
            return None
        sizes = []
        blocks = dict(zip(data.datasets, data.classes_per_task or ()))
        for name in data.datasets:
            entry = CATALOGUE[name]
            share = min(blocks[name], entry.n_classes) / entry.n_classes if data.kind == "split" else 1.0
            raw = int(entry.paper_sizes[0] * share)
            sizes.append(raw - validation_count(raw, data.validation_fraction))
        fewest = min(sizes)
        return fewest if data.max_train_samples is None else min(fewest, data.max_train_samples)


def hyperparameter_problem(cls: type[Approach], hyperparameters: Hyperparameters,
                           spec: BenchmarkSpec) -> DomainProblem | None:
    """Why approach `cls` cannot run with these hyper-parameters on benchmark `spec` (its hook), or None. A spec's
    own data set that cannot be read yet (not there) gives no facts: its run refuses it when the data is read."""
    try:
        return cls.hyperparameter_problem(hyperparameters, BenchmarkFacts(spec))
    except ClbenchError:
        return None


def given(spec: BenchmarkSpec, method: str, key: str) -> bool:
    """Whether the spec's section of `method` (its file, variant, `--set` or `--grid`) gives `key` a value, rather
    than the approach's default."""
    node: Any = spec.approach_section(method)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def domain_refusal(problem: DomainProblem, method: str, hyperparameters: Hyperparameters) -> Refusal:
    """The refusal of a domain problem: the key (`approaches.METHOD.KEY`), its value and the reason. A value the
    spec or an option gave is an error of that value (`Refusal.message`, raised when the section is resolved); an
    approach's default that does not fit the benchmark refuses the approach there, as its body or scenario would."""
    key = f"approaches.{method}.{problem.key}"
    value: Any = hyperparameters
    for part in problem.key.split("."):
        value = getattr(value, part)
    shown = list(value) if isinstance(value, tuple) else value
    return Refusal(key, f"approach {method}: `{key}` is {shown!r}; {problem.reason}")


def physical_memory() -> int | None:
    """The machine's memory in bytes, or None where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def memory_problem(key: str, needed: float, what: str) -> DomainProblem | None:
    """A problem when `needed` bytes (what the value makes the approach allocate, `what` says of what) exceed this
    machine's memory: the allocator would fail, or the machine swap, after the data had been read."""
    available = physical_memory()
    if available is None or needed <= available:
        return None
    return DomainProblem(key, f"{what} would take about {_gib(needed)} GiB, more than this machine's "
                              f"{_gib(available)} GiB of memory; use a smaller value")


def _gib(size: float) -> str:
    return f"{size / 2 ** 30:,.1f}"


def special_values(cls: type[Approach], key: str) -> tuple[float, ...]:
    """The `special` values of hyper-parameter `key` of approach `cls` (as `--grid` names it: `bic.lamb`, or
    `approaches.bic.lamb`), which mean something other than their number; () for another key (`training.lr`)."""
    parts = key.split(".")
    parts = parts[1:] if parts[0] == "approaches" else parts
    if parts[0] != cls.name:
        return ()
    node: Any = cls.hyperparameters_class
    for part in parts[1:]:
        found = {spec_field.name: spec_field for spec_field in fields(node)} if is_dataclass(node) else {}
        if part not in found:
            return ()
        metadata, node = found[part].metadata, found[part].type
    return tuple((metadata.get("special") or {}) if len(parts) > 1 else ())
