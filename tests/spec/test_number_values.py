"""Numbers that PyYAML (YAML 1.1) reads as strings, `1e-2`: number fields read them; errors name the origin."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from clbench.errors import SpecError
from clbench.spec import load_benchmark
from clbench.spec.fields import build, field, read_number


@pytest.mark.parametrize("text, number", [
    ("1e-2", 0.01), ("1E-2", 0.01), ("5e3", 5000.0), (".5", 0.5), ("1_000", 1000), ("1e3", 1000.0),
    ("-.5e-3", -0.0005), ("+2", 2), ("1.0e4", 10000.0), ("1.", 1.0), ("1_000.5", 1000.5),
    ("1e+3", 1000.0), ("2.5E+1", 25.0),  # an exponent with its sign written
])
def test_read_number_reads_yaml_1_2_numbers(text: str, number: float) -> None:
    value = read_number(text)
    assert value == number and type(value) is type(number)


@pytest.mark.parametrize("text", ["true", "yes", ".inf", "nan", "0x10", "1:30", "1e", "e3", "abc", "1__0", "_1", "1_",
                                  "", "1e-2 ", "mnist", "1.2.3"])
def test_read_number_leaves_other_text_alone(text: str) -> None:
    assert read_number(text) is None


@dataclass(frozen=True)
class Example:
    """One field of each kind that a number string could reach."""

    count: int = field(1, doc="an integer", minimum=0)
    rate: float = field(0.5, doc="a number")
    sizes: tuple[int, ...] = field((2,), doc="integers")
    name: str = field("a", doc="a string")
    flag: bool = field(False, doc="a switch")


def test_number_fields_read_number_strings_and_other_fields_keep_them() -> None:
    built = build(Example, {"count": "1e3", "rate": "1E-2", "sizes": ["5e1", 3.0], "name": "1e5"}, where="e",
                  source="s")
    assert built == Example(count=1000, rate=0.01, sizes=(50, 3), name="1e5")
    assert type(built.count) is int and all(type(size) is int for size in built.sizes)


@pytest.mark.parametrize("values, message", [
    ({"count": 1.5}, "s: `e.count` is 1.5 (float); expected an integer"),
    ({"count": "2.5e0"}, "s: `e.count` is 2.5 (float); expected an integer"),
    ({"count": "1e400"}, "s: `e.count` is inf (float); expected an integer"),
    ({"rate": "1e"}, "s: `e.rate` is '1e' (str); expected a number"),
    ({"flag": "1e0"}, "s: `e.flag` is '1e0' (str); expected true or false"),
    ({"name": 1e5}, "s: `e.name` is 100000.0 (float); expected a string"),
])
def test_what_is_still_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as error:
        build(Example, values, where="e", source="s")
    assert str(error.value) == message


def test_an_error_names_the_option_that_set_the_key_or_its_section() -> None:
    origins = {"e.count": "--set e.count=1.5", "e": "--set e={rate: x}"}
    with pytest.raises(SpecError, match=r"^--set e.count=1.5: `e.count`"):
        build(Example, {"count": 1.5}, where="e", source="s", origins=origins)
    with pytest.raises(SpecError, match=r"^--set e=\{rate: x\}: `e.rate`"):
        build(Example, {"rate": "x"}, where="e", source="s", origins=origins)


def test_a_later_section_override_replaces_an_earlier_key_s_origin() -> None:
    spec = load_benchmark("mnist2", ["training.lr=1e-2", "training={max_epochs: 3}"])
    assert spec.origins == {"training": "--set training={max_epochs: 3}"}
    assert spec.training.lr == 0.05  # the section was replaced: the file's lr is gone, the default is back
    spec = load_benchmark("mnist2", ["hat.smax=4e2"], ["--grid hat.smax=4e2,25"])
    assert spec.origins == {"approaches.hat.smax": "--grid hat.smax=4e2,25"}


def test_a_value_in_a_file_is_named_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\ndata: {kind: split, datasets: [mnist], classes_per_task: [5], form: mnist28}\n"
                    "network: {kind: mlp, hidden: [10]}\ntraining: {max_epochs: 2.5}\n")
    with pytest.raises(SpecError) as error:
        load_benchmark(str(path), ["training.lr=1e-2"])
    assert str(error.value) == f"{path}: `training.max_epochs` is 2.5 (float); expected an integer"


@pytest.mark.parametrize("override, message", [
    ("data={kind: split}", "--set data={kind: split}: missing required key `data.datasets`"),
    ("datasets={mine: {format: npz}}",
     "--set datasets={mine: {format: npz}}: missing required key `datasets.mine.path`"),
])
def test_a_key_missing_from_a_section_set_whole_is_named_with_the_option(override: str, message: str) -> None:
    with pytest.raises(SpecError) as error:
        load_benchmark("mnist2", [override])
    assert str(error.value) == message
