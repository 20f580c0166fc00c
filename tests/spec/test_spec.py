"""Spec validation: typed objects from YAML, errors that name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from clbench.approaches.registry import REGISTRY, approach_names
from clbench.approaches.resolution import resolve
from clbench.errors import SpecError
from clbench.spec import benchmark_names, benchmarks_dir, check_approach_sections, load_benchmark


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bench.yaml"
    path.write_text(text)
    return path


MINIMAL = """
name: mini
data: {kind: split, datasets: [mnist], classes_per_task: [5], form: mnist28}
network: {kind: mlp, hidden: [10]}
"""


def _variants(name: str) -> list[str | None]:
    """None (the spec's default) and every named variant of a shipped spec, read from its YAML."""
    raw = yaml.safe_load((benchmarks_dir() / f"{name}.yaml").read_text())
    return [None, *(raw.get("variants") or {})]


# Approaches whose shipped sections keep their authors' optimiser and lr (cited in the specs): (optimizer, lr).
AUTHORS_OPTIMIZER = {"wsn": ("adam", 0.001), "supsup": ("rmsprop", 1e-4)}


@pytest.mark.parametrize("name", benchmark_names())
def test_shipped_specs_validate_with_every_approach_section(name: str) -> None:
    assert set(benchmark_names()) >= {"mnist2", "pmnist", "mixture8", "cifar-incremental"}
    for variant in _variants(name):
        spec = load_benchmark(name, [] if variant is None else [f"variant={variant}"])
        assert spec.approaches, f"{name} ({variant}) has no approach section"
        check_approach_sections(spec, approach_names())
        for method in spec.approaches:
            resolved = resolve(spec, method)
            assert isinstance(resolved.hyperparameters, REGISTRY[method].hyperparameters_class)
            if method in AUTHORS_OPTIMIZER:
                assert (resolved.training.optimizer, resolved.training.lr) == AUTHORS_OPTIMIZER[method]
            elif spec.data.validation_fraction > 0:  # the paper's lr (seq-mnist's are Mammoth's: test_online_protocol)
                assert resolved.training.lr == 0.05


def test_misspelled_section_in_a_spec_file_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "approaches:\n  sgd: {}\n  haat: {smax: 3}\n")
    spec = load_benchmark(str(path))
    with pytest.raises(SpecError) as error:
        check_approach_sections(spec, ["hat", "sgd"])
    message = str(error.value)
    assert str(path) in message and "approaches.haat" in message and "known approaches: hat, sgd" in message
    with pytest.raises(SpecError, match="unknown approach 'haat'"):
        resolve(spec, "sgd")  # resolving any method checks every section against the registry


def test_known_names_come_from_the_caller() -> None:
    spec = load_benchmark("mnist2", ["my-plugin.alpha=1"])
    check_approach_sections(spec, [*approach_names(), "my-plugin"])  # a registered plugin's section is fine
    with pytest.raises(SpecError, match="'my-plugin.alpha=1'.*unknown approach 'my-plugin'"):
        check_approach_sections(spec, approach_names())


@pytest.mark.parametrize("override", ["haat.smax=3", "approaches.haat.smax=3"])
def test_misspelled_approach_in_set_names_the_override(override: str) -> None:
    spec = load_benchmark("mnist2", [override])
    with pytest.raises(SpecError) as error:
        resolve(spec, "hat")
    message = str(error.value)
    assert repr(override) in message and "unknown approach 'haat'" in message
    assert ", ".join(approach_names()) in message


def test_section_of_an_approach_not_run_is_validated_too() -> None:
    spec = load_benchmark("mnist2", ["hat.smaxx=3"])
    with pytest.raises(SpecError, match="approaches.hat.smaxx"):
        resolve(spec, "sgd")


def test_bare_set_key_is_an_error_naming_it() -> None:
    with pytest.raises(SpecError, match="--set smax: unknown key.*hat.smax"):
        load_benchmark("mnist2", ["smax=3"])


def test_paper_protocol_is_the_default() -> None:
    spec = load_benchmark("mnist2")
    assert (spec.training.lr, spec.training.lr_factor, spec.training.lr_min) == (0.05, 3.0, 1e-4)
    assert (spec.training.patience, spec.training.max_epochs, spec.training.batch_size) == (5, 200, 64)
    assert spec.data.validation_fraction == 0.15
    assert spec.network.hidden == (800, 800, 800)


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "training: {learning_rate: 0.1}\n")
    with pytest.raises(SpecError) as error:
        load_benchmark(str(path))
    assert "training.learning_rate" in str(error.value) and str(path) in str(error.value)
    assert "lr" in str(error.value)  # lists the valid keys


def test_unknown_top_level_key(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown key `optimizer`"):
        load_benchmark(str(write(tmp_path, MINIMAL + "optimizer: adam\n")))


def test_wrong_type_names_key(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"`training.max_epochs` is 'many'.*integer"):
        load_benchmark(str(write(tmp_path, MINIMAL + "training: {max_epochs: many}\n")))


def test_out_of_range_value(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"`data.validation_fraction` is 1.5; it must be <= 0.9"):
        text = MINIMAL.replace("form: mnist28", "form: mnist28, validation_fraction: 1.5")
        load_benchmark(str(write(tmp_path, text)))


def test_bad_choice(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="`network.kind` is 'resnet'"):
        load_benchmark(str(write(tmp_path, MINIMAL.replace("kind: mlp", "kind: resnet"))))


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\ndata: {kind: split\nnetwork: [\n")
    with pytest.raises(SpecError) as error:
        load_benchmark(str(path))
    assert str(path) in str(error.value) and "line" in str(error.value)


def test_unknown_benchmark_lists_valid_ones() -> None:
    with pytest.raises(SpecError, match="unknown benchmark 'mnist3'.*mnist2.*pmnist"):
        load_benchmark("mnist3")


def test_overrides_apply_and_are_validated() -> None:
    spec = load_benchmark("mnist2", ["training.max_epochs=3", "data.max_train_samples=2000", "hat.smax=200"])
    assert spec.training.max_epochs == 3 and spec.data.max_train_samples == 2000
    assert spec.approaches["hat"]["smax"] == 200
    with pytest.raises(SpecError, match="training.max_epoch"):
        load_benchmark("mnist2", ["training.max_epoch=3"])
    with pytest.raises(SpecError, match="KEY=VALUE"):
        load_benchmark("mnist2", ["training.max_epochs"])


def test_approach_section_validated_against_its_dataclass() -> None:
    spec = load_benchmark("mnist2", ["sgd.momentum=0.9"])
    with pytest.raises(SpecError, match="approaches.sgd.momentum"):
        resolve(spec, "sgd")
    with pytest.raises(SpecError, match="unknown method 'adam'.*sgd"):
        resolve(spec, "adam")


def test_approach_training_section_overrides_protocol() -> None:
    spec = load_benchmark("mnist2", ["sgd.training.max_epochs=7"])
    assert resolve(spec, "sgd").training.max_epochs == 7
    assert resolve(spec, "sgd-f").training.max_epochs == 200


def test_variants_select_network_and_hyperparameters() -> None:
    small, large = load_benchmark("pmnist"), load_benchmark("pmnist", ["variant=large"])
    assert small.network.hidden == (100, 100) and small.approaches["hat"]["smax"] == 200
    assert large.network.hidden == (2000, 2000) and large.network.dropout == 0.5
    assert large.approaches["hat"]["smax"] == 400 and large.variant == "large"
    with pytest.raises(SpecError, match="unknown variant 'huge'.*small, medium, large"):
        load_benchmark("pmnist", ["variant=huge"])
    # --set wins over the variant
    assert load_benchmark("pmnist", ["variant=large", "network.dropout=0.1"]).network.dropout == 0.1


def test_split_remainder_is_an_error_at_load_time() -> None:
    with pytest.raises(SpecError) as error:
        load_benchmark("mnist2", ["data.classes_per_task=[3]"])
    message = str(error.value)
    assert message.startswith("--set data.classes_per_task=[3]: ")  # the value the user typed, not the file's
    assert "`data.classes_per_task` is 3 for mnist, which has 10 classes" in message and "(2, 5, 10)" in message
    assert "`data.remainder`" in message
    suggested = message.split("divides 10 (")[1].split(")")[0]
    for block in suggested.split(", "):  # every suggested block size is accepted (before: 1, which is refused)
        assert load_benchmark("mnist2", [f"data.classes_per_task=[{block}]"]).data.classes_per_task == (int(block),)
    assert load_benchmark("mnist2", ["data.classes_per_task=[3]", "data.remainder=merge"]).data.remainder == "merge"
    with pytest.raises(SpecError, match="`data.remainder` is 'ignore'; expected one of error, keep, drop, merge"):
        load_benchmark("mnist2", ["data.remainder=ignore"])


def test_wrong_data_form_lists_the_forms() -> None:
    with pytest.raises(SpecError, match=r"`data.form` is 'mnist32'; expected one of image32, mnist28"):
        load_benchmark("mnist2", ["data.form=mnist32"])
    with pytest.raises(SpecError, match=r"`data.form` mnist28 is only for mnist, fashion-mnist and a spec.s own"):
        load_benchmark("cifar-incremental", ["data.form=mnist28"])


@pytest.mark.parametrize("classes", ["[5, 5]", "[]"])
def test_classes_per_task_needs_exactly_one_value_per_data_set(tmp_path: Path, classes: str) -> None:
    path = write(tmp_path, MINIMAL.replace("classes_per_task: [5]", f"classes_per_task: {classes}"))
    with pytest.raises(SpecError, match=r"bench.yaml: `data.classes_per_task` needs one value per data set"):
        load_benchmark(str(path))


@pytest.mark.parametrize("name", ["my data!", "x/../../outside", "ok-name/", "-leading"])
def test_an_own_data_set_name_is_checked_whole(tmp_path: Path, name: str) -> None:
    # the name becomes part of a cache folder (`custom/<name>-<hash>`): every character counts, not a prefix
    path = write(tmp_path, f"{MINIMAL}datasets:\n  '{name}': {{format: npz, path: a.npz}}\n")
    with pytest.raises(SpecError, match=r"the data set name `datasets\..*`.*: a name uses letters, digits"):
        load_benchmark(str(path))
    assert load_benchmark(str(write(tmp_path, f"{MINIMAL}datasets:\n  my.data_2-b: {{format: npz, path: a.npz}}\n"))
                          ).datasets.keys() == {"my.data_2-b"}
