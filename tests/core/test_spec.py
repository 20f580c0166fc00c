"""Spec validation: typed objects from YAML, errors that name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from clbench.approaches import resolve
from clbench.errors import SpecError
from clbench.spec import benchmark_names, load_benchmark


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bench.yaml"
    path.write_text(text)
    return path


MINIMAL = """
name: mini
data: {kind: split, datasets: [mnist], classes_per_task: [5], form: mnist28}
network: {kind: mlp, hidden: [10]}
"""


def test_shipped_specs_validate_with_every_approach_section() -> None:
    assert set(benchmark_names()) >= {"mnist2", "pmnist", "mixture8", "cifar-incremental"}
    for name in benchmark_names():
        spec = load_benchmark(name)
        for method in spec.approaches:
            resolved = resolve(spec, method) if method in _registered() else None
            if resolved is not None:
                assert resolved.training.lr == 0.05


def _registered() -> set[str]:
    from clbench.approaches import REGISTRY

    return set(REGISTRY)


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
