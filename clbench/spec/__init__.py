"""The benchmark definition, torch-free: a YAML spec -> validated, typed objects.

- `sections`: the spec's sections as typed objects (`DataSpec`, `NetworkSpec`, `TrainingSpec`, `BenchmarkSpec`);
- `files`: finding and reading a spec file (a shipped name or a path), the rule for names that become folders;
- `benchmark`: loading a spec (variants, `--set` overrides), validation, unknown approach sections;
- `data_checks`: the rules of the `data:` section (class blocks, the domain scenario, forms) and per-task checks;
- `catalogue`: the built-in data sets' facts (names, class counts, forms, the paper's sizes), shared with
  `clbench.data.sources`;
- `fields`: typed dataclass fields with their docs and ranges, building them from mappings, stable hashes;
- `grid`: `--grid KEY=V1,V2` -> one `--set` list per grid point; a spec's default grids (`grids:`, `default_grid`);
- `render`: a resolved spec written back as commented YAML (`clbench spec`).

The public names of `sections`, `files`, `benchmark` and `data_checks` are re-exported here:
`from clbench.spec import load_benchmark, BenchmarkSpec`.
"""

from __future__ import annotations

from clbench.spec.benchmark import check_approach_sections, load_benchmark
from clbench.spec.data_checks import (
    MIN_TASK_CLASSES,
    ONE_DATASET_KINDS,
    class_blocks,
    domain_class_problem,
    task_problem,
    validation_count,
)
from clbench.spec.files import (
    NAME_PATTERN,
    NAME_RULE,
    benchmark_names,
    benchmarks_dir,
    check_name,
    command_argument,
    find_spec_file,
    is_spec_path,
    is_valid_name,
    read_yaml,
)
from clbench.spec.sections import (
    TOP_LEVEL_KEYS,
    BenchmarkSpec,
    DatasetEntry,
    DataSpec,
    NetworkSpec,
    TrainingSpec,
    ignored_class_loss,
    scenario_training,
    without_continual_evaluation,
)

__all__ = [
    "MIN_TASK_CLASSES",
    "NAME_PATTERN",
    "NAME_RULE",
    "ONE_DATASET_KINDS",
    "TOP_LEVEL_KEYS",
    "BenchmarkSpec",
    "DataSpec",
    "DatasetEntry",
    "NetworkSpec",
    "TrainingSpec",
    "benchmark_names",
    "benchmarks_dir",
    "check_approach_sections",
    "check_name",
    "class_blocks",
    "command_argument",
    "domain_class_problem",
    "find_spec_file",
    "ignored_class_loss",
    "is_spec_path",
    "is_valid_name",
    "load_benchmark",
    "read_yaml",
    "scenario_training",
    "without_continual_evaluation",
    "task_problem",
    "validation_count",
]
