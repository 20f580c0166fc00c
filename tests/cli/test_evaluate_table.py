"""`clbench evaluate`'s table at 80 columns (issue 58, item 7): a run id is never cut, so two seeds' rows do not read
the same; the per-task accuracies wrap instead."""

from __future__ import annotations

from rich.console import Console

from clbench.cli.evaluate import evaluation_table

IDS = [f"pmnist/er-ace/3f2a9c1e4b5d6a7f/seed-{seed}" for seed in (0, 1)]  # 16-digit config hash, as stored
PER_TASK = " ".join(f"{90 + task / 10:.1f}" for task in range(10))


def test_run_ids_are_whole_at_80_columns() -> None:
    console = Console(width=80, record=True, force_terminal=False)
    console.print(evaluation_table("task-aware", [[run_id, "10", "93.41%", PER_TASK] for run_id in IDS]))
    text = console.export_text()
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    assert all(any(run_id in line for line in text.splitlines()) for run_id in IDS)  # each whole, on one line
    assert "93.41%" in text
