"""The benchmark definition, torch-free: a YAML spec -> validated, typed objects.

- `benchmark`: the spec's sections (`DataSpec`, `NetworkSpec`, `TrainingSpec`, `BenchmarkSpec`), finding and
  loading a spec file (variants, `--set` overrides), validation;
- `fields`: typed dataclass fields with their docs and ranges, building them from mappings, stable hashes;
- `grid`: `--grid KEY=V1,V2` -> one `--set` list per grid point; a spec's default grids (`grids:`, `default_grid`);
- `render`: a resolved spec written back as commented YAML (`clbench spec`).

The names of `benchmark` are re-exported here: `from clbench.spec import load_benchmark, BenchmarkSpec`.
"""

from __future__ import annotations

from clbench.spec.benchmark import (
    DATASET_NAME,
    MIN_TASK_CLASSES,
    NAME_PATTERN,
    NAME_RULE,
    ONE_DATASET_KINDS,
    TOP_LEVEL_KEYS,
    BenchmarkSpec,
    DatasetEntry,
    DataSpec,
    NetworkSpec,
    TrainingSpec,
    benchmark_names,
    benchmarks_dir,
    check_approach_sections,
    check_name,
    class_blocks,
    command_argument,
    domain_class_problem,
    find_spec_file,
    is_spec_path,
    is_valid_name,
    load_benchmark,
    read_yaml,
    task_problem,
    validation_count,
)

__all__ = [
    "DATASET_NAME",
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
    "is_spec_path",
    "is_valid_name",
    "load_benchmark",
    "read_yaml",
    "task_problem",
    "validation_count",
]
