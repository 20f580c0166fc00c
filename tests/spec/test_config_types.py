"""Types in specs and `--set`: booleans are not numbers, floats are finite; errors name the key."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clbench.approaches.resolution import resolve
from clbench.cli import app
from clbench.errors import SpecError
from clbench.spec import load_benchmark
from clbench.spec.fields import build, field


@dataclass(frozen=True)
class Example:
    """A config with one field of each numeric kind."""

    count: int = field(1, doc="an integer", minimum=0)
    rate: float = field(0.5, doc="a number", minimum=0.0)
    sizes: tuple[int, ...] = field((2,), doc="integers", minimum=1)
    limit: int | None = field(None, doc="optional integer", minimum=1)
    flag: bool = field(False, doc="a switch")


@pytest.mark.parametrize("key, value, expected", [
    ("count", True, "an integer"),
    ("rate", False, "a number"),
    ("sizes", [3, True], "an integer"),
    ("limit", True, "an integer"),
    ("flag", 1, "true or false"),
    ("rate", float("inf"), "a finite number"),
    ("rate", float("nan"), "a finite number"),
])
def test_build_rejects_booleans_as_numbers_and_non_finite_floats(key: str, value: object, expected: str) -> None:
    with pytest.raises(SpecError) as error:
        build(Example, {key: value}, where="example", source="spec.yaml")
    message = str(error.value)
    assert message.startswith("spec.yaml: `example.") and f".{key}" in message and expected in message


def test_build_accepts_an_integer_for_a_float() -> None:
    built = build(Example, {"count": 3, "rate": 2, "sizes": [4, 5], "limit": 7, "flag": True}, where="e", source="s")
    assert built == Example(count=3, rate=2.0, sizes=(4, 5), limit=7, flag=True)
    assert isinstance(built.rate, float)


@pytest.mark.parametrize("override, key", [
    ("training.lr=true", "training.lr"),
    ("training.max_epochs=yes", "training.max_epochs"),  # YAML 1.1: yes is a boolean
    ("network.hidden=[800,true]", "network.hidden[1]"),
    ("training.lr=.inf", "training.lr"),
    ("training.lr=.nan", "training.lr"),
])
def test_set_rejects_booleans_and_non_finite_numbers(override: str, key: str) -> None:
    with pytest.raises(SpecError, match=re.escape(f"`{key}` is ")):
        load_benchmark("mnist2", [override])


def test_approach_section_rejects_a_boolean_number(tmp_path: Path) -> None:
    spec = load_benchmark("mnist2", ["hat.smax=true"])
    with pytest.raises(SpecError, match=r"`approaches.hat.smax` is True \(bool\); expected a number"):
        resolve(spec, "hat")


def test_cli_boolean_learning_rate_exits_2_naming_the_key(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train", "mnist2", "-m", "sgd", "--set", "training.lr=true",
                                      "--results", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "`training.lr` is True (bool); expected a number" in " ".join(result.output.split())
    assert not (tmp_path / "r").exists()
