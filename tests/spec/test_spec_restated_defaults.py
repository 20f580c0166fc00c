"""A shipped spec states only what differs from each method's defaults (its hyper-parameter dataclass).

A value in `approaches:` equal to the dataclass default, or a variant's value equal to what the spec has without
the variant, restates it: a changed default would then have to be found in every spec that copies it. An approach
with nothing to change stays listed as `method: {}` (the listing is what `clbench spec` shows). An approach's own
`training:` values are protocol overrides, rendered as such by `clbench spec`, and are not checked here.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from clbench.approaches.registry import lookup
from clbench.spec import benchmark_names, benchmarks_dir
from clbench.spec.fields import build

KEPT_ON_PURPOSE: dict[tuple[str, str, str, str], str] = {
    # (spec, "approaches" or "variants.NAME", method, key) -> why the spec restates the value; none so far.
}


def _typed(method: str, values: dict[str, Any]) -> Any:
    """The method's validated hyper-parameters for `values` (defaults for the rest)."""
    return build(lookup(method).hyperparameters_class, values, where=f"approaches.{method}", source="test")


def restated_values(name: str, raw: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(spec, section, method, key) of every hyper-parameter a spec's YAML restates.

    In `approaches:` a value restates the dataclass default; in a variant, the value in effect without the variant
    (the base section's value, else the default).
    """
    base = raw.get("approaches") or {}
    found = [(name, "approaches", method, key)
             for method, section in base.items() for key, value in section.items()
             if key != "training" and getattr(_typed(method, {key: value}), key) == getattr(_typed(method, {}), key)]
    for variant, overrides in (raw.get("variants") or {}).items():
        for method, section in ((overrides or {}).get("approaches") or {}).items():
            without = _typed(method, {k: v for k, v in base.get(method, {}).items() if k != "training"})
            found += [(name, f"variants.{variant}", method, key) for key, value in section.items()
                      if key != "training" and getattr(_typed(method, {key: value}), key) == getattr(without, key)]
    return found


@pytest.mark.parametrize("name", benchmark_names())
def test_a_shipped_spec_restates_no_default(name: str) -> None:
    raw = yaml.safe_load((benchmarks_dir() / f"{name}.yaml").read_text())

    restated = [where for where in restated_values(name, raw) if where not in KEPT_ON_PURPOSE]

    assert restated == [], f"{name}: values equal to what is in effect without them (drop them, or list them in " \
                           f"KEPT_ON_PURPOSE with the reason): {restated}"


def test_the_check_finds_a_restated_default_and_a_variant_restating_the_base() -> None:
    raw = {"approaches": {"sgd": {"clip_grad_norm": 10000}, "hat": {"smax": 200, "c": 0.75, "training": {"lr": 0.05}},
                          "ewc": {"lamb": 100}},
           "variants": {"big": {"approaches": {"hat": {"smax": 400, "c": 0.75}, "ewc": {"lamb": 100.0}}}}}

    assert restated_values("s", raw) == [("s", "approaches", "sgd", "clip_grad_norm"), ("s", "approaches", "hat", "c"),
                                         ("s", "variants.big", "hat", "c"), ("s", "variants.big", "ewc", "lamb")]
