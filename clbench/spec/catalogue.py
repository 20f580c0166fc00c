"""The built-in data sets as facts: names, class counts, forms and the paper's sizes (torch-free, numpy-free).

The one place these facts are written. The spec checks a benchmark's `data:` section against them (known names,
class blocks that divide a data set's classes, the domain scenario's equal tasks, which forms a data set has);
`clbench.data.sources` adds how each data set is obtained (upstream files, converter, normalisation per form)
and reads the facts from here.

Forms:
    image32: (N, 3, 32, 32) uint8 for the conv nets (every built-in data set has it).
    mnist28: (N, 1, 28, 28) uint8 originals, for the MLP benchmarks (mnist and fashion-mnist only).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass

FORMS = ("image32", "mnist28")


@dataclass(frozen=True)
class CatalogueEntry:
    """The facts of one built-in data set."""

    name: str  # its `clbench fetch` name, used in `data.datasets`
    n_classes: int  # labels 0..n_classes-1
    forms: tuple[str, ...]  # the forms it is prepared in (see FORMS)
    paper_sizes: tuple[int, int]  # (train, test) as in the paper's Table 4


CATALOGUE: Mapping[str, CatalogueEntry] = types.MappingProxyType({entry.name: entry for entry in (
    CatalogueEntry("mnist", 10, ("image32", "mnist28"), (60000, 10000)),
    CatalogueEntry("fashion-mnist", 10, ("image32", "mnist28"), (60000, 10000)),
    CatalogueEntry("cifar10", 10, ("image32",), (50000, 10000)),
    CatalogueEntry("cifar100", 100, ("image32",), (50000, 10000)),
    CatalogueEntry("svhn", 10, ("image32",), (73257, 26032)),
    CatalogueEntry("traffic-signs", 43, ("image32",), (39209, 12630)),
    CatalogueEntry("facescrub", 100, ("image32",), (20600, 2289)),
    CatalogueEntry("notmnist", 10, ("image32",), (16853, 1873)),
)})
"""name -> facts, in the order `clbench fetch --list` shows them."""

DATASET_NAMES: tuple[str, ...] = tuple(CATALOGUE)


def datasets_with_form(form: str) -> tuple[str, ...]:
    """The built-in data sets prepared in `form`, in catalogue order (mnist28: mnist, fashion-mnist)."""
    return tuple(name for name, entry in CATALOGUE.items() if form in entry.forms)
