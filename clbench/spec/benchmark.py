"""Benchmark specs: `benchmarks/<name>.yaml` -> validated, typed objects.

A spec has the keys `name`, `description`, `data`, `network`, `training`, `approaches`, and optionally
`variant` + `variants` (named sets of overrides, e.g. pmnist's small/medium/large network), `datasets`
(the spec's own data sets: an image folder or an npz file, see `clbench.data.custom`) and `grids` (each
approach's default hyper-parameter grid for `clbench tune`, with where its values were published; see
`clbench.spec.grid`). The grids are kept apart from `approaches`: a grid is not a run's config, so it enters no
config, data or reference hash, and an approach section stays exactly its hyper-parameters. Overrides from
`--set KEY=VALUE` are applied last; a first key segment that names an approach means `approaches.<name>`. A value
refused by validation is named with the option that gave it (`--set ...`, `--grid ...`), else with the file.
Approach sections are validated against the approach's own hyper-parameter dataclass by
`clbench.approaches.resolve` (that needs torch; this module does not); `check_approach_sections` makes a section
that names no registered approach (a typo such as `haat`) an error, given the registry's names.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any

import yaml

from clbench.errors import SpecError
from clbench.spec.fields import build, field, origin_of, parse_override
from clbench.spec.grid import GridAxis, read_spec_grids

TOP_LEVEL_KEYS = ("name", "description", "data", "network", "training", "approaches", "variant", "variants",
                  "datasets", "grids")
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""The rule every name that becomes a folder follows (benchmarks, approaches, a spec's own data sets): letters,
digits, `.`, `_`, `-`, starting with a letter or digit, so never `.`, `..` or a path with `/`."""
NAME_RULE = "a name uses letters, digits, '.', '_', '-' and starts with a letter or digit (not '.', '..' or a path)"
DATASET_NAME = NAME_PATTERN  # the rule's first user kept its name


def is_valid_name(name: object) -> bool:
    """True if `name` is a string that follows `NAME_PATTERN` (safe as one folder name)."""
    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def check_name(name: object, where: str) -> str:
    """`name` if it follows the name rule, else SpecError `{where} is {name!r}: a name uses ...`."""
    if not is_valid_name(name):
        raise SpecError(f"{where} is {name!r}: {NAME_RULE}")
    return str(name)


@dataclass(frozen=True)
class DatasetEntry:
    """A spec's own data set (`datasets: {NAME: {format: ..., path: ...}}`), prepared like the built-ins."""

    format: str = field(doc="imagefolder: PATH/train/<class>/*.png|jpg and PATH/test/<class>/*; "
                            "npz: one .npz file with x_train, y_train, x_test, y_test", choices=("imagefolder", "npz"))
    path: str = field(doc="the folder or .npz file; a relative path resolves against the spec file's folder")


@dataclass(frozen=True)
class DataSpec:
    """How the sequence of tasks is built from data sets."""

    kind: str = field(doc="mixture: each data set is a task; split: class blocks of each data set; "
                          "permuted: pixel permutations of one data set; rotated: rotations of one data set by a "
                          "seeded angle per task (Mammoth's rot-mnist)",
                      choices=("mixture", "split", "permuted", "rotated"))
    datasets: tuple[str, ...] = field(doc="data sets used, by their `clbench fetch` names")
    form: str = field("image32", doc="image32: 3x32x32 (conv net); mnist28: 28x28 originals, flattened for MLPs",
                      choices=("image32", "mnist28"))
    classes_per_task: tuple[int, ...] | None = field(
        None, doc="split: classes per task for each data set, e.g. [5] for split MNIST, [2, 20] for CIFAR", minimum=1)
    remainder: str = field("error", doc="split: classes left over when a block size does not divide a data set's "
                                        "class count: error, keep (a smaller last task), drop, or merge (into the "
                                        "last task)", choices=("error", "keep", "drop", "merge"))
    n_tasks: int | None = field(None, doc="permuted, rotated: the number of permutations or rotations (tasks)",
                                minimum=1)
    shuffle_tasks: bool = field(True, doc="task order shuffled by the seed (paper: yes; split MNIST: fixed)")
    validation_fraction: float = field(0.15, doc="held-out share of each task's training set (paper: 15%); 0: no "
                                                 "validation split (the online protocol: needs "
                                                 "training.early_stopping false)", minimum=0.0, maximum=0.9)
    max_train_samples: int | None = field(
        None, doc="seeded, stratified subsample of each task's training set (quick runs); null = all", minimum=10)
    max_test_samples: int | None = field(
        None, doc="seeded, stratified subsample of each task's test set (quick runs); null = all", minimum=10)
    augment: bool = field(False, doc="random crop (padding 4, zeros) and horizontal flip of every training batch and "
                                     "replayed batch (Mammoth's seq-cifar10 TRANSFORM); image32 only; never on "
                                     "validation or test", added=True)
    scenario: str = field("task", doc="task: the task id is given (one head per task, the paper's setting); "
                                      "class: no task id, one output over every class seen so far (FACIL's "
                                      "task-agnostic training: cross-entropy over the seen tasks' heads, or over "
                                      "every output: training.class_loss); domain: no task id, every task has the "
                                      "same classes, class c of every task is output c of one head shared by all "
                                      "tasks",
                          choices=("task", "class", "domain"), added=True)


IMAGE_NETWORKS = ("alexnet", "resnet18")  # the conv bodies: they need `data.form` image32


@dataclass(frozen=True)
class NetworkSpec:
    """The shared network body; every task gets its own linear head (multi-head, task id known)."""

    kind: str = field(doc="mlp (MNIST benchmarks), alexnet (the paper's AlexNet-like conv net) or resnet18 (the "
                          "CIFAR ResNet-18 of the replay papers: Mammoth's resnet18, GEM's reduced one)",
                      choices=("mlp", "alexnet", "resnet18"))
    hidden: tuple[int, ...] = field((2048, 2048), doc="mlp: hidden layer sizes (paper pmnist: 100/500/2000 x2; "
                                                      "split MNIST: 800 x3)", minimum=1)
    input_dropout: float = field(0.0, doc="mlp: dropout on the input (EWC's large pmnist net: 0.2)",
                                 minimum=0.0, maximum=0.95)
    dropout: float = field(0.0, doc="mlp: dropout after each hidden layer", minimum=0.0, maximum=0.95)
    conv_channels: tuple[int, ...] = field((64, 128, 256), doc="alexnet: filters per conv layer", minimum=1)
    conv_kernels: tuple[int, ...] = field((4, 3, 2), doc="alexnet: kernel size per conv layer", minimum=1)
    conv_dropout: tuple[float, ...] = field((0.2, 0.2, 0.5), doc="alexnet: dropout after each conv layer",
                                            minimum=0.0, maximum=0.95)
    fc_units: tuple[int, ...] = field((2048, 2048), doc="alexnet: units per fully-connected layer", minimum=1)
    fc_dropout: float = field(0.5, doc="alexnet: dropout after each fully-connected layer",
                              minimum=0.0, maximum=0.95)
    nf: int = field(64, doc="resnet18: channels of the first stage (then 2nf, 4nf, 8nf); Mammoth's resnet18: 64, GEM's "
                            "reduced ResNet-18: 20", minimum=1, added=True)


@dataclass(frozen=True)
class TrainingSpec:
    """The paper's protocol (Experiments: Training), shared by every approach unless it overrides a value."""

    lr: float = field(0.05, doc="initial learning rate of plain SGD (paper: 0.05)", above=0.0)
    lr_factor: float = field(3.0, doc="divide the lr by this after `patience` epochs without improvement",
                             minimum=1.0)
    lr_min: float = field(1e-4, doc="stop the task when the lr falls below this (paper: 1e-4)", minimum=0.0)
    patience: int = field(5, doc="epochs without validation-loss improvement before an lr decay (paper: 5)",
                          minimum=1)
    max_epochs: int = field(200, doc="epochs per task at most (paper: 200)", minimum=1)
    batch_size: int = field(64, doc="training batch size (paper: 64)", minimum=1)
    eval_batch_size: int = field(4096, doc="batch size for validation and test (no effect on results)", minimum=1)
    compile: bool = field(False, doc="torch.compile the network's body (off: the paper's eager numerics; on: "
                                     "fused kernels whose float rounding differs slightly; first epoch slower)")
    amp: str = field("none", doc="autocast of the training forward/loss and of evaluation: none (float32, the "
                                 "paper) or bf16 (bfloat16 matmuls/convs: faster on GPUs, ~3 significant digits)",
                     choices=("none", "bf16"))
    early_stopping: bool = field(True, doc="the paper's protocol: validation loss each epoch, lr decay on a plateau, "
                                           "stop below lr_min, best weights restored; false: exactly max_epochs "
                                           "epochs at lr, the last weights kept (the online protocol: max_epochs 1)",
                                 added=True)
    class_loss: str = field("seen", doc="class scenario's cross-entropy (training and validation): seen, over the "
                                        "classes of the tasks seen so far (FACIL); all, over every output of the "
                                        "sequence, future classes included (Mammoth, the DER paper)",
                            choices=("seen", "all"), added=True)


@dataclass(frozen=True)
class BenchmarkSpec:
    """A validated benchmark: where it came from, its data, network, protocol, and raw approach sections."""

    name: str
    description: str
    source: str
    variant: str | None
    data: DataSpec
    network: NetworkSpec
    training: TrainingSpec
    approaches: dict[str, dict[str, Any]]
    datasets: dict[str, DatasetEntry] = dataclass_field(default_factory=dict)  # own data sets, absolute paths
    grids: dict[str, tuple[GridAxis, ...]] = dataclass_field(default_factory=dict)  # approach -> `tune`'s default grid
    overrides: tuple[str, ...] = ()  # the `--set`/`--grid` texts applied, to name them in errors
    origins: dict[str, str] = dataclass_field(default_factory=dict)  # dotted key -> the option that set it

    def approach_section(self, method: str) -> dict[str, Any]:
        """The raw (not yet validated) section of one approach; empty if the spec has none."""
        return dict(self.approaches.get(method, {}))


def benchmarks_dir() -> Path:
    """The folder of shipped specs: `clbench/benchmarks/` in an installed wheel, else `benchmarks/` of the checkout.

    The repository keeps the specs at its top level; the wheel ships them as the package data `clbench.benchmarks`
    (see setup.py). A source checkout or an editable install reads them where they are.
    """
    package = Path(__file__).resolve().parents[1]  # clbench/ (this file is clbench/spec/benchmark.py)
    installed = package / "benchmarks"
    return installed if installed.is_dir() else package.parent / "benchmarks"


def is_spec_path(name_or_path: str) -> bool:
    """True if a benchmark argument names a YAML file (by suffix, or because it exists), not a shipped spec.

    A folder that happens to share a shipped benchmark's name (`mnist2/` in the current folder) does not hide it.
    """
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return True
    return path.exists() and name_or_path not in benchmark_names()


def command_argument(spec: BenchmarkSpec) -> str:
    """How a printed command names this benchmark: its name if it is a shipped spec, else its spec file (quoted)."""
    shipped = benchmarks_dir() / f"{spec.name}.yaml"
    source = Path(spec.source)
    if source.is_file() and shipped.is_file() and source.resolve() == shipped.resolve():
        return spec.name
    return shlex.quote(spec.source)


def benchmark_names() -> list[str]:
    """Names of the shipped benchmark specs."""
    return sorted(path.stem for path in benchmarks_dir().glob("*.yaml"))


def find_spec_file(name_or_path: str) -> Path:
    """A benchmark name from `benchmarks/` or a path to a YAML spec."""
    path = Path(name_or_path)
    if is_spec_path(name_or_path):
        if path.is_dir():
            raise SpecError(f"spec path {name_or_path} is a folder, not a YAML file; give the spec file in it "
                            f"(e.g. {path / 'my.yaml'})")
        if not path.is_file():
            raise SpecError(f"spec file {name_or_path} does not exist")
        return path
    candidate = benchmarks_dir() / f"{name_or_path}.yaml"
    if not candidate.is_file():
        names = ", ".join(benchmark_names())
        raise SpecError(f"unknown benchmark {name_or_path!r}; valid benchmarks: {names} (or a path to a YAML spec)")
    return candidate


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; syntax errors name the file and line."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise SpecError(f"{path}:{line} YAML syntax error: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a spec must be a YAML mapping with keys {', '.join(TOP_LEVEL_KEYS)}")
    return data


def load_benchmark(name_or_path: str, overrides: Sequence[str] = (),
                   origins: Sequence[str] | None = None) -> BenchmarkSpec:
    """Load, merge the chosen variant, apply `--set` overrides and validate a benchmark spec.

    Args:
        name_or_path: a shipped benchmark's name or a YAML spec file.
        overrides: `KEY=VALUE` texts, applied in order.
        origins: for each override, the option that gave it, named when its value is refused (default:
            `--set KEY=VALUE`; `clbench train` names a grid point's value by its `--grid` option).
    """
    if origins is None:
        origins = [f"--set {text}" for text in overrides]
    if len(origins) != len(overrides):
        raise ValueError(f"{len(overrides)} overrides but {len(origins)} origins")
    path = find_spec_file(name_or_path)
    raw = read_yaml(path)
    parsed = [parse_override(text) for text in overrides]
    raw = _apply_variant(raw, parsed, source=str(path))
    set_by: dict[str, str] = {}
    for (key_path, value), origin in zip(parsed, origins):
        if key_path != ["variant"]:
            key = ".".join(_set(raw, key_path, value))
            set_by = {set_key: text for set_key, text in set_by.items() if not set_key.startswith(f"{key}.")}
            set_by[key] = origin
    return replace(_validate(raw, source=str(path), origins=set_by), overrides=tuple(overrides), origins=set_by)


def check_approach_sections(spec: BenchmarkSpec, known: Collection[str]) -> None:
    """Raise SpecError if an approach section (from the file, its variant, `--set` or `--grid`), or a section of
    `grids:`, is not in `known`.

    Args:
        spec: a loaded spec.
        known: the registered approach names (`clbench.approaches.approach_names()`, plugins included).
    """
    unknown = sorted(set(spec.approaches) - set(known))
    if not unknown:
        _check_grid_sections(spec, known)
        return
    name = unknown[0]
    culprit = next((text for text in spec.overrides if _override_section(text) == name), None)
    where = f"override {culprit!r} (--set/--grid)" if culprit else f"section `approaches.{name}`"
    raise SpecError(f"{spec.source}: {where} names unknown approach {name!r}; known approaches: "
                    f"{', '.join(sorted(known))} (fix the spelling, or remove the section)")


def _check_grid_sections(spec: BenchmarkSpec, known: Collection[str]) -> None:
    """SpecError if `grids:` has a section for an approach not in `known` (`grids.haat`)."""
    unknown = sorted(set(spec.grids) - set(known))
    if unknown:
        name = unknown[0]
        raise SpecError(f"{origin_of(f'grids.{name}', spec.source, spec.origins)}: section `grids.{name}` names "
                        f"unknown approach {name!r}; known approaches: {', '.join(sorted(known))} (fix the "
                        f"spelling, or remove the section)")


def _override_section(text: str) -> str | None:
    """The approach section an override text writes to (`haat.smax=3` -> haat), or None."""
    key_path, _ = parse_override(text)
    if key_path[0] == "approaches":
        return key_path[1] if len(key_path) > 1 else None
    return None if key_path[0] in TOP_LEVEL_KEYS else key_path[0]


def _apply_variant(raw: dict[str, Any], parsed: list[tuple[list[str], Any]], source: str) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    variants = raw.pop("variants", None) or {}
    chosen = raw.get("variant")
    for key_path, value in parsed:
        if key_path == ["variant"]:
            chosen = value
    if chosen is None:
        return raw
    if chosen not in variants:
        valid = ", ".join(variants) or "none"
        raise SpecError(f"{source}: unknown variant {chosen!r}; valid variants: {valid}")
    raw["variant"] = chosen
    return _deep_merge(raw, variants[chosen])


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in (update or {}).items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _set(raw: dict[str, Any], key_path: list[str], value: Any) -> list[str]:
    """Apply one `--set` override; `hat.smax` means `approaches.hat.smax`. Returns the full key path set."""
    if len(key_path) == 1 and key_path[0] not in TOP_LEVEL_KEYS:
        raise SpecError(f"--set {key_path[0]}: unknown key; use a section key such as training.lr or "
                        f"hat.smax, or one of {', '.join(TOP_LEVEL_KEYS)}")
    if key_path[0] not in TOP_LEVEL_KEYS:
        key_path = ["approaches", *key_path]
    node = raw
    for depth, part in enumerate(key_path[:-1]):
        child = node.get(part)
        if child is None and (depth == 0 or key_path[0] in ("approaches", "grids")):
            child = node[part] = {}
        if not isinstance(child, dict):
            raise SpecError(f"--set {'.'.join(key_path)}: `{'.'.join(key_path[:depth + 1])}` is not a section")
        node = child
    node[key_path[-1]] = value
    return key_path


def _validate(raw: dict[str, Any], source: str, origins: dict[str, str]) -> BenchmarkSpec:
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise SpecError(f"{source}: unknown key `{unknown[0]}` (valid keys: {', '.join(TOP_LEVEL_KEYS)})")
    for key in ("name", "data", "network"):
        if key not in raw:
            raise SpecError(f"{source}: missing required key `{key}`")
    datasets = _own_datasets(raw.get("datasets"), source, origins)
    data = build(DataSpec, raw["data"], where="data", source=source, origins=origins)
    _check_data(data, source, tuple(datasets), origins)
    approaches = raw.get("approaches") or {}
    if not isinstance(approaches, dict) or not all(isinstance(v, dict) for v in approaches.values()):
        raise SpecError(f"{source}: `approaches` must map approach names to mappings of hyper-parameters")
    network = build(NetworkSpec, raw["network"], where="network", source=source, origins=origins)
    if network.kind in IMAGE_NETWORKS and data.form != "image32":
        raise SpecError(f"{source}: `network.kind` {network.kind} needs `data.form` image32 (3x32x32 images), not "
                        f"{data.form}; use `network.kind: mlp` for {data.form}")
    return BenchmarkSpec(
        name=check_name(raw["name"], f"{source}: `name`"),
        description=str(raw.get("description", "")),
        source=source,
        variant=raw.get("variant"),
        data=data,
        network=network,
        training=build(TrainingSpec, raw.get("training"), where="training", source=source, origins=origins),
        approaches={name: dict(values) for name, values in approaches.items()},
        datasets=datasets,
        grids=read_spec_grids(raw.get("grids"), source, origins),
    )


def _own_datasets(raw: Any, source: str, origins: dict[str, str]) -> dict[str, DatasetEntry]:
    """The `datasets:` section: typed entries whose relative paths resolve against the spec file's folder."""
    from clbench.data.sources import DATASET_NAMES

    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SpecError(f"{source}: `datasets` must map data set names to {{format: ..., path: ...}}")
    entries = {}
    for name, values in raw.items():
        check_name(name, f"{source}: the data set name `datasets.{name}`")
        if name in DATASET_NAMES:
            raise SpecError(f"{source}: `datasets.{name}` would hide the built-in data set {name}; rename it")
        entry = build(DatasetEntry, values, where=f"datasets.{name}", source=source, origins=origins)
        path = Path(entry.path).expanduser()
        if not path.is_absolute():
            path = Path(source).resolve().parent / path
        entries[name] = DatasetEntry(entry.format, str(path))
    return entries


ONE_DATASET_KINDS = ("permuted", "rotated")  # kinds whose every task is all of one data set, transformed

MIN_TASK_CLASSES = 2  # a one-class task is 100% accurate for every method, `random` included


def class_blocks(dataset: str, n_classes: int, block: int, remainder: str = "error") -> list[range]:
    """Classes 0..n_classes-1 in consecutive blocks of `block` >= 1 (the tasks of a split data set).

    When `block` does not divide `n_classes`, `remainder` says what happens to the rest (`data.remainder`):
    error (SpecError: [3] on MNIST would leave `mnist:9-9` over), keep (a smaller last task), drop (the rest is
    not used) or merge (the rest joins the last full block). A block of one class is a SpecError: a one-class
    task is trivially 100% accurate.
    """
    blocks = _class_blocks(dataset, n_classes, block, remainder)
    single = next((blocked for blocked in blocks if len(blocked) < MIN_TASK_CLASSES), None)
    if single is not None:
        raise SpecError(f"`data.classes_per_task` is {block} for {dataset} ({n_classes} classes, remainder "
                        f"{remainder}): task {dataset}:{single.start}-{single.stop - 1} would have one class; a task "
                        f"needs at least two classes (with one, every method scores 100%)")
    return blocks


def _class_blocks(dataset: str, n_classes: int, block: int, remainder: str) -> list[range]:
    rest = n_classes % block
    full = [range(first, first + block) for first in range(0, n_classes - rest, block)]
    if rest == 0:
        return full
    if remainder == "keep" or (remainder == "merge" and not full):
        return [*full, range(n_classes - rest, n_classes)]
    if remainder == "merge":
        return [*full[:-1], range(full[-1].start, n_classes)]
    if remainder == "drop" and full:
        return full
    divisors = ", ".join(str(d) for d in range(1, n_classes + 1) if n_classes % d == 0)
    raise SpecError(f"`data.classes_per_task` is {block} for {dataset}, which has {n_classes} classes: blocks of "
                    f"{block} leave {rest} class(es) over; use a block size that divides {n_classes} ({divisors}) "
                    f"or set `data.remainder` to keep, drop or merge (now {remainder})")


def validation_count(n_train: int, fraction: float) -> int:
    """How many of a task's `n_train` training samples are held out for validation (`data.validation_fraction`)."""
    return int(round(fraction * n_train))


def task_problem(n_classes: int, n_train: int, n_test: int, validation_fraction: float) -> str | None:
    """Why a task cannot be trained and scored (None if it can): fewer than two classes, or a split without samples.

    A task with no test samples scored 0.0 and dragged every mean down; one with no training or validation
    samples trained nothing. `n_train` is the task's training split before the validation hold-out. A fraction of 0
    asks for no validation split (the online protocol), so an empty one is then what was asked for.
    """
    if n_classes < MIN_TASK_CLASSES:
        return "it has one class; a task needs at least two classes (with one, every method scores 100%)"
    n_valid = validation_count(n_train, validation_fraction)
    sizes = {"training": n_train - n_valid, "validation": n_valid, "test": n_test}
    if validation_fraction == 0:
        sizes.pop("validation")
    empty = [split for split, size in sizes.items() if size <= 0]
    if not empty:
        return None
    counts = ", ".join(f"{split} {size}" for split, size in sizes.items())
    return (f"no {' and no '.join(empty)} samples ({counts}, validation = {validation_fraction:g} of {n_train}); "
            f"every task needs samples in each split")


def _check_class_blocks(data: DataSpec, source: str) -> None:
    """The split's block sizes against the class counts of the built-in data sets (others: when loaded).

    `source` names where `data.classes_per_task` came from: the file, or the `--set`/`--grid` option.
    """
    from clbench.data.sources import DATASET_NAMES, get_source  # torch-free, but only needed here

    for name, block in zip(data.datasets, data.classes_per_task or ()):
        if name in DATASET_NAMES:
            try:
                class_blocks(name, get_source(name).n_classes, block, data.remainder)
            except SpecError as error:
                raise SpecError(f"{source}: {error}") from None


def _check_data(data: DataSpec, source: str, own_datasets: tuple[str, ...] = (),
                origins: dict[str, str] | None = None) -> None:
    from clbench.data.sources import DATASET_NAMES

    known = (*DATASET_NAMES, *own_datasets)
    for name in data.datasets:
        if name not in known:
            raise SpecError(f"{origin_of('data.datasets', source, origins or {})}: `data.datasets`: unknown data "
                            f"set {name}; known: {', '.join(known)} (declare your own under `datasets:`)")
    if data.kind == "split" and (data.classes_per_task is None or len(data.classes_per_task) != len(data.datasets)):
        raise SpecError(f"{source}: `data.classes_per_task` needs one value per data set for kind split")
    if data.kind == "split":
        _check_class_blocks(data, origin_of("data.classes_per_task", source, origins or {}))
    if data.kind in ONE_DATASET_KINDS and (data.n_tasks is None or len(data.datasets) != 1):
        raise SpecError(f"{source}: kind {data.kind} needs exactly one data set and `data.n_tasks`")
    if data.scenario == "domain":
        _check_domain_classes(data, origin_of("data.scenario", source, origins or {}))
    if data.form == "mnist28" and not set(data.datasets) <= {"mnist", "fashion-mnist", *own_datasets}:
        raise SpecError(f"{source}: `data.form` mnist28 is only for mnist, fashion-mnist and a spec's own data sets")
    if data.augment and data.form != "image32":
        raise SpecError(f"{origin_of('data.augment', source, origins or {})}: `data.augment` is the random crop and "
                        f"flip of 3x32x32 images (data.form image32); it is not defined for data.form {data.form}")


def domain_class_problem(class_counts: Sequence[int], names: Sequence[str]) -> str | None:
    """Why a task sequence cannot run in the domain scenario (None if it can): its tasks' class counts differ.

    The domain scenario gives class c of every task output unit c of one shared head, so every task must have the
    same number of classes.
    """
    if len(set(class_counts)) <= 1:
        return None
    counts = ", ".join(f"{name} {count}" for name, count in zip(names, class_counts))
    return (f"data.scenario domain needs the same number of classes in every task (class c of every task is output "
            f"c of one shared head); the tasks have {counts} classes: use data.scenario task or class, or tasks of "
            f"equal size")


def _check_domain_classes(data: DataSpec, source: str) -> None:
    """SpecError (one line) if the built-in data sets' tasks of a domain-scenario spec have different class counts;
    a spec's own data sets are checked when their tasks are built (`clbench.data.tasks.build_tasks`)."""
    from clbench.data.sources import DATASET_NAMES, get_source

    if data.kind in ONE_DATASET_KINDS or not set(data.datasets) <= set(DATASET_NAMES):
        return
    counts, names = [], []
    if data.kind == "mixture":
        for name in data.datasets:
            counts.append(get_source(name).n_classes)
            names.append(name)
    else:
        for name, block in zip(data.datasets, data.classes_per_task or ()):
            for blocked in class_blocks(name, get_source(name).n_classes, block, data.remainder):
                counts.append(len(blocked))
                names.append(f"{name}:{blocked.start}-{blocked.stop - 1}")
    problem = domain_class_problem(counts, names)
    if problem is not None:
        raise SpecError(f"{source}: {problem}")
