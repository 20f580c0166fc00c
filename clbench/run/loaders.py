"""The data loaders a run is given: prepared data sets, fetched when missing, and a spec's own data sets.

`fetching_loader` (a picklable `FetchingLoader`, for worker processes and Ray tasks) loads and fetches;
`prepare_data` fetches every data set of the specs once before runs start; `loader_for` tells a loader about a
spec's own data sets (`datasets:`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from clbench.data.custom import CustomDataset
from clbench.data.tasks import DatasetLoader
from clbench.errors import DataNotFoundError
from clbench.spec import BenchmarkSpec


@dataclass(frozen=True)
class FetchingLoader:
    """Loads prepared data sets, fetching (with the same mirror setting) those that are missing.

    A picklable `DatasetLoader`, so that worker processes and Ray tasks can receive it.
    """

    data_dir: Path
    mirror: str | None = None
    own_datasets: tuple[CustomDataset, ...] = ()  # a spec's own data sets (see `for_spec`)

    def for_spec(self, spec: BenchmarkSpec) -> FetchingLoader:
        """This loader, also knowing the spec's own data sets (`datasets:`)."""
        from clbench.data.custom import custom_datasets

        return dataclasses.replace(self, own_datasets=tuple(custom_datasets(spec).values()))

    def __call__(self, name: str, form: str):  # type: ignore[no-untyped-def]
        from clbench.data.custom import load_custom
        from clbench.data.sources import fetch_dataset, load_dataset

        for dataset in self.own_datasets:
            if dataset.name == name:
                return load_custom(dataset, self.data_dir, form)
        try:
            return load_dataset(name, self.data_dir, form)
        except DataNotFoundError:
            fetch_dataset(name, self.data_dir, self.mirror)
            return load_dataset(name, self.data_dir, form)


def fetching_loader(data_dir: Path, mirror: str | None) -> FetchingLoader:
    """Load prepared data sets, fetching (with the same mirror setting) those that are missing."""
    return FetchingLoader(Path(data_dir), mirror)


def prepare_data(specs: Iterable[BenchmarkSpec], data_dir: Path, mirror: str | None) -> None:
    """Fetch every data set the specs need once, before runs start (missing data: DataNotFoundError)."""
    from clbench.data.custom import custom_datasets, prepare_custom
    from clbench.data.sources import fetch_dataset

    specs = list(specs)
    for spec in specs:
        for dataset in custom_datasets(spec).values():
            prepare_custom(dataset, Path(data_dir))
    builtin = (name for spec in specs for name in spec.data.datasets if name not in spec.datasets)
    for name in dict.fromkeys(builtin):
        fetch_dataset(name, Path(data_dir), mirror)


def loader_for(loader: DatasetLoader, spec: BenchmarkSpec) -> DatasetLoader:
    """`loader`, told about the spec's own data sets when it can load them (a `FetchingLoader`)."""
    return loader.for_spec(spec) if spec.datasets and isinstance(loader, FetchingLoader) else loader
