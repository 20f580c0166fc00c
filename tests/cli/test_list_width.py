"""`clbench list` at 80 columns (issue 58, item 7): the parameter counts are split over as many tables as it takes
for every count and benchmark name to be shown whole, never cut to `6,72…`."""

from __future__ import annotations

from rich.console import Console

from clbench.cli.listing import parameter_tables

BENCHMARKS = ["cifar-incremental", "cifar10-5", "cifar100-10", "mixture8", "mnist2", "mnist5", "pmnist", "rot-mnist",
              "seq-mnist"]  # the shipped ones: nine columns of up to 10-digit counts do not fit 80 columns
APPROACHES = ["adahat", "er-ace", "imm-mean", "supsup"]


def rendered(tables: list[object], width: int) -> str:
    console = Console(width=width, record=True, force_terminal=False)
    for table in tables:
        console.print(table)
    return console.export_text()


def test_every_count_and_name_is_shown_whole_at_80_columns() -> None:
    columns = {name: [f"{11_173_962 - 7 * row - index:,}" if row else "refused (12)" for row in range(4)]
               for index, name in enumerate(BENCHMARKS)}
    tables = parameter_tables(APPROACHES, columns, 80)
    text = rendered(tables, 80)
    assert "…" not in text and len(tables) > 1
    assert all(len(line) <= 80 for line in text.splitlines())
    for name, cells in columns.items():
        assert name in text and all(cell in text for cell in cells)
    assert text.count("approach") == len(tables) and text.count("imm-mean") == len(tables)


def test_one_table_where_it_fits() -> None:
    columns = {"mnist2": ["1,917,610", "0", "98,700", "refused (1)"]}
    assert len(parameter_tables(APPROACHES, columns, 80)) == 1
