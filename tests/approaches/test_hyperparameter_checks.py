"""The domain checks by hand: the values that ended in a traceback, a NaN or the allocator's error after the run had
started are refused by `train`, `tune`, `spec` and `list` in one line naming key, value and what is allowed, exit 2,
no run folder; a field's declared domain (`below`, `min_items`, `special`) and the approach's hook
(`hyperparameter_problem`) say it; a default that does not fit a benchmark refuses the approach there.
`test_hyperparameter_domains.py` draws every field of every approach."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from clihelpers import TINY, invoke_fresh, kept_registry, offline

from clbench.approaches.domains import BenchmarkFacts, special_values
from clbench.approaches.registry import REGISTRY
from clbench.approaches.resolution import refusal, resolve
from clbench.errors import SpecError
from clbench.spec import load_benchmark
from clbench.spec.fields import build, field
from clbench.tuning.scoring import grid_ends

# (option, benchmark, what the one line says after the key and value); each once ended after the run had started
REFUSED = [
    ("gpm.thresholds=[]", "mnist2", "`approaches.gpm.thresholds` is []; it needs at least 1 value"),  # IndexError
    ("lucir.k=100", "mnist5", "`approaches.lucir.k` is 100; a task after the first has 2 classes, and the margin "
                              "ranking needs k of a task's new classes: use k <= 2"),  # SpecError inside the run
    ("bic.val_fraction=1", "mnist5", "`approaches.bic.val_fraction` is 1.0; it must be < 1"),  # NaN, torch.cat
    ("bic.val_fraction=0.9", "mnist5", "`approaches.bic.val_fraction` is 0.9; the first task holds out 90 training "
                                       "images of each of its classes (buffer_size 200), and a task has about 50 per "
                                       "class: none would be left to train on"),
    ("er-ace.buffer_size=1e12", "mnist5", "`approaches.er-ace.buffer_size` is 1000000000000; a memory of "
                                          "1,000,000,000,000 samples would take about"),  # the allocator's error
    ("supsup.output_size=1e7", "mnist5", "`approaches.supsup.output_size` is 10000000; 3 masked layers of 10,000,000 "
                                         "outputs with a score per edge and task would take about"),
    ("supsup.output_size=1", "mnist5", "`approaches.supsup.output_size` is 1; it must be >= 2"),  # raised to 2 silently
    ("supsup.output_size=4", "mnist2", "`approaches.supsup.output_size` is 4; a task of this benchmark has 5 classes"),
    ("pathnet.modules_per_path=17", "mnist2", "`approaches.pathnet.modules_per_path` is 17; a path picks "
                                             "modules_per_path of a layer's 16 modules"),  # was a ValueError
    ("gdumb.minlr=0.1", "mnist2", "`approaches.gdumb.minlr` is 0.1; the fit's cosine runs from maxlr (0.05) down"),
    ("icarl.buffer_size=9", "mnist5", "`approaches.icarl.buffer_size` is 9; approach icarl keeps buffer_size // "
                                      "(classes seen) samples per class, 9 // 10 = 0 after the last task"),
    ("bic.lamb=-0.5", "mnist5", "`approaches.bic.lamb` is -0.5; it must be >= 0.0 (or -1: lambda = old / seen "
                                "classes)"),
    ("packnet.prune_fraction=1", "mnist2", "`approaches.packnet.prune_fraction` is 1.0; it must be < 1"),
    ("wsn.c=0", "mnist2", "`approaches.wsn.c` is 0.0; it must be > 0"),
    ("gpm.layer_samples=[10,400]", "mnist2", "`approaches.gpm.layer_samples` is [10, 400]; each layer's samples are "
                                            "taken among the gpm.samples (300) images"),
]
SMALL = ["--set", "data.max_train_samples=100"]  # 100 training images per task: 50 per class on mnist5


@pytest.mark.parametrize("option, benchmark, expected", REFUSED)
def test_train_refuses_a_value_outside_its_domain_before_any_work(option: str, benchmark: str, expected: str,
                                                                  tmp_path: Path) -> None:
    method = option.split(".")[0]
    code, output = invoke_fresh("train", benchmark, "-m", method, "--seeds", "0", "--set", option, *SMALL, *TINY,
                                *offline(tmp_path), "--results", str(tmp_path / "r"))
    assert code == 2, output
    assert output.startswith(f"error: --set {option}: approach {method}: ") or \
        output.startswith(f"--set {option}: approach {method}: ") or f"--set {option}: " in output, output
    assert expected in output, output
    assert "Traceback" not in output and not (tmp_path / "r").exists()


def test_xder_views_that_cannot_be_allocated_are_refused_with_augmentation_only() -> None:
    """simclr_num_aug views of each of the batch's 32 and the 64 memory samples (the consistency term runs only with
    data.augment)."""
    option = "xder.simclr_num_aug=1e9"
    with pytest.raises(SpecError, match=r"`approaches.xder.simclr_num_aug` is 1000000000; 96,000,000,000 augmented "
                                        r"views per step would take about"):
        resolve(load_benchmark("cifar10-5", [option, "data.augment=true"]), "xder")
    resolve(load_benchmark("cifar10-5", [option, "data.augment=false"]), "xder")


@pytest.mark.parametrize("command", ["spec", "tune"])
def test_spec_and_tune_refuse_it_in_the_same_line(command: str, tmp_path: Path) -> None:
    extra = ["-m", "lucir", "--grid", "lucir.k=2,100", *offline(tmp_path), "--results", str(tmp_path / "r")] \
        if command == "tune" else ["--set", "lucir.k=100"]
    code, output = invoke_fresh(command, "mnist5", *extra)
    assert code == 2, output
    assert "`approaches.lucir.k` is 100; a task after the first has 2 classes" in output, output
    assert "Traceback" not in output and not (tmp_path / "r").exists()


def test_list_refuses_a_spec_file_with_a_value_outside_its_domain(tmp_path: Path) -> None:
    text = Path(load_benchmark("mnist2").source).read_text().replace("  gpm: {}\n", "  gpm: {thresholds: []}\n")
    (tmp_path / "mine.yaml").write_text(text)
    code, output = invoke_fresh("list", "-b", str(tmp_path / "mine.yaml"))
    assert code == 2, output
    assert "`approaches.gpm.thresholds` is []; it needs at least 1 value" in output


def test_a_default_that_does_not_fit_the_benchmark_refuses_the_approach_there() -> None:
    """The default 200 exemplars over mixture8's 293 classes (the shipped spec gives 2000): `list` shows it refused
    (exit 0), `train` refuses it in one line; a value given that fits runs."""
    shipped = load_benchmark("mixture8")
    assert refusal(shipped, "icarl") is None
    spec = replace(shipped, approaches={name: section for name, section in shipped.approaches.items()
                                        if name != "icarl"})
    refused = refusal(spec, "icarl")
    assert refused is not None and refused.key == "approaches.icarl.buffer_size"
    assert refused.reason == ("approach icarl: `approaches.icarl.buffer_size` is 200; approach icarl keeps "
                              "buffer_size // (classes seen) samples per class, 200 // 293 = 0 after the last task "
                              "of this benchmark: use at least 293")
    with pytest.raises(SpecError, match="buffer_size` is 200"):
        resolve(spec, "icarl")
    assert resolve(load_benchmark("mixture8", ["icarl.buffer_size=293"]), "icarl").hyperparameters.buffer_size == 293


def test_the_facts_are_the_spec_s() -> None:
    facts = BenchmarkFacts(load_benchmark("mnist5", ["data.max_train_samples=100"]))
    assert (facts.head_sizes, facts.n_classes, facts.input_size) == ((2, 2, 2, 2, 2), 10, 784)
    assert facts.fewest_training_samples == 100
    # pmnist: 60,000 images per task, 15% held out for validation
    assert BenchmarkFacts(load_benchmark("pmnist")).fewest_training_samples == 60000 - 9000
    # mnist2: 5 of 10 classes per task, 30,000 images, 15% held out
    assert BenchmarkFacts(load_benchmark("mnist2")).fewest_training_samples == 30000 - 4500


@dataclass(frozen=True)
class Toy:
    share: float = field(0.5, doc="a share", minimum=0.0, below=1.0)
    weights: tuple[float, ...] = field((1.0,), doc="weights", minimum=0.0, min_items=1)
    lamb: float = field(-1.0, doc="a weight", minimum=0.0, special={-1.0: "chosen by the method"})


@pytest.mark.parametrize("mapping, expected", [
    ({"share": 1.0}, "`toy.share` is 1.0; it must be < 1"),
    ({"weights": []}, "`toy.weights` is []; it needs at least 1 value"),
    ({"weights": [1.0, -2.0]}, "`toy.weights[1]` is -2.0; it must be >= 0.0"),
    ({"lamb": -0.5}, "`toy.lamb` is -0.5; it must be >= 0.0 (or -1: chosen by the method)"),
])
def test_a_field_declares_its_domain(mapping: dict, expected: str) -> None:
    with pytest.raises(SpecError) as refused:
        build(Toy, mapping, where="toy", source="my.yaml")
    assert str(refused.value) == f"my.yaml: {expected}"


def test_a_field_s_edges_and_special_values_are_accepted() -> None:
    assert build(Toy, {"share": 0.999, "weights": [0.0], "lamb": -1}, where="toy", source="x") == \
        Toy(0.999, (0.0,), -1.0)
    assert build(Toy, {"share": 0.0, "lamb": 0}, where="toy", source="x") == Toy(0.0, (1.0,), 0.0)


def test_a_special_value_is_no_end_of_a_grid() -> None:
    """`tune --grid bic.lamb=-1,1`: -1 is lambda = old / seen classes, not the lowest number."""
    special = {"bic.lamb": special_values(REGISTRY["bic"], "bic.lamb")}
    assert special == {"bic.lamb": (-1.0,)}
    assert grid_ends(["bic.lamb=-1,1"], [("bic.lamb", "1")], special) == []
    assert grid_ends(["bic.lamb=-1,1"], [("bic.lamb", "-1")], special) == []
    assert grid_ends(["bic.lamb=-1,1,2"], [("bic.lamb", "1")], special)[0][:3] == ("bic.lamb", "1", "lowest")
    assert grid_ends(["bic.lamb=-1,1"], [("bic.lamb", "-1")])[0][:3] == ("bic.lamb", "-1", "lowest")  # unaware
    assert special_values(REGISTRY["bic"], "training.lr") == ()



def test_a_plugin_s_hook_is_asked_as_a_built_in_s() -> None:
    """A plugin declares its cross-field rule with `clbench.api` alone; `resolve` refuses a value that breaks it."""
    import clbench.api as cl

    @dataclass(frozen=True)
    class Pair(cl.Hyperparameters):
        low: int = cl.field(1, doc="low", minimum=0)
        high: int = cl.field(2, doc="high", minimum=0)

    class Ordered(cl.Approach):
        name = "ordered-plugin"
        summary = "a plugin with a cross-field rule"
        hyperparameters_class = Pair

        @classmethod
        def hyperparameter_problem(cls, hyperparameters, facts):  # type: ignore[no-untyped-def]
            if hyperparameters.low > hyperparameters.high:
                return cl.DomainProblem("low", f"use at most high ({hyperparameters.high})")
            return None

    with kept_registry():
        cl.register(Ordered)
        spec = load_benchmark("mnist2", ["ordered-plugin.low=3"])
        with pytest.raises(SpecError) as refused:
            resolve(spec, "ordered-plugin")
        assert str(refused.value) == ("--set ordered-plugin.low=3: approach ordered-plugin: "
                                      "`approaches.ordered-plugin.low` is 3; use at most high (2)")
