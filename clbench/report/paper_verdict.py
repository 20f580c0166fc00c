"""Whether our mean is within the paper's number, cell by cell (`clbench report --paper`). Torch-free, pure.

The rule, one place: our mean is *within* when |ours - paper| <= the paper's std, or <= 1 point (0.01) where the
paper gives no std, both read at the paper's printed precision (accuracy in percent with one decimal, the
forgetting ratio with two), so that the paper's `99.0 (0.0)` admits a mean that prints as 99.0. A cell is never
called within when its runs differ from the paper's protocol (fewer epochs or images, another network, ...) or when
the paper's number was trained under another paper's protocol; a cell without runs says what makes them.
"""

from __future__ import annotations

ONE_POINT = 0.01  # the tolerance where the paper gives no std: one point of accuracy (0.01 as a fraction)
NO_RUNS = "no runs"
NOT_PROTOCOL = "not the paper's protocol (see settings)"


def printed(value: float, metric: str) -> float:
    """`value` (a fraction, or a forgetting ratio) as the paper prints it: percent with one decimal for accuracy
    (0.9164 -> 91.6), two decimals for the forgetting ratio (-0.0549 -> -0.05)."""
    return round(value * 100, 1) if metric == "accuracy" else round(value, 2)


def within(ours: float, paper: float, std: float | None, metric: str) -> bool:
    """|ours - paper| <= the paper's std (ONE_POINT where it gives none), at the paper's printed precision."""
    tolerance = ONE_POINT if std is None else std
    return abs(printed(ours - paper, metric)) <= printed(tolerance, metric) + 1e-9


def difference_text(ours: float, paper: float, metric: str) -> str:
    """ours - paper as the paper prints its numbers, signed (`+0.4`, `-0.03`)."""
    return f"{printed(ours - paper, metric) + 0.0:+.{1 if metric == 'accuracy' else 2}f}"  # + 0.0: never "-0.0"


def verdict(ours: float | None, seeds: int, paper: float, std: float | None, metric: str, *,
            paper_seeds: int | None = None, differences: tuple[str, ...] = (), other_protocol: str | None = None,
            command: str | None = None) -> str:
    """The within column of one cell, checked in this order:

    - `ours` None: `no runs: COMMAND` (`command`: what makes them), or the first of `differences` when runs exist
      that do not reach the cell's stage;
    - `other_protocol` (the paper quotes the number from another paper): `not comparable: ...`;
    - any of `differences` (the runs' settings that differ from the paper's protocol, seed count excluded):
      `not the paper's protocol`, never within;
    - else `within` or `not within (+x.x)`, with `(n of N seeds)` when the paper averages `paper_seeds` runs and
      ours are fewer or more.
    """
    if ours is None:
        return f"{NO_RUNS}: {command}" if command else (differences[0] if differences else NO_RUNS)
    if other_protocol:
        return f"not comparable: {other_protocol}"
    if differences:
        return NOT_PROTOCOL
    found = "within" if within(ours, paper, std, metric) else f"not within ({difference_text(ours, paper, metric)})"
    return found + (f" ({seeds} of {paper_seeds} seeds)" if paper_seeds is not None and seeds != paper_seeds else "")
