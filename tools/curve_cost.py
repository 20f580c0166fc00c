"""What the continual evaluation costs a run: the seconds spent inside `CurveRecorder.record`, and its points.

    OMP_NUM_THREADS=1 python tools/curve_cost.py train mnist5 -m sgd --seeds 0 --set training.max_epochs=5 \
        --set training.eval_every=50 --set training.eval_subset=500 --results R

Runs the `clbench` command given (one run at a time, in this process: leave out `--jobs`) with
`clbench.run.curve.CurveRecorder.record` timed, and prints the command's wall time, the seconds inside the recorder
(every point of every run: the learned tasks and the current one on `eval_subset` images each, both evaluations),
how many points it took (calls) and their mean. With `eval_every: 0` the recorder is never called.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class Timing:
    """Calls of one method and the seconds spent inside them."""

    calls: int = 0
    seconds: float = 0.0


@contextmanager
def timed_method(owner: type, name: str, clock: Callable[[], float] = time.perf_counter) -> Iterator[Timing]:
    """Count and time every call of `owner.name` while the block runs; the method is restored afterwards."""
    original = getattr(owner, name)
    timing = Timing()

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = clock()
        try:
            return original(*args, **kwargs)
        finally:
            timing.seconds += clock() - start
            timing.calls += 1

    setattr(owner, name, timed)
    try:
        yield timing
    finally:
        setattr(owner, name, original)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0].startswith("-"):
        raise SystemExit(__doc__)
    from clbench.cli import main as clbench
    from clbench.run.curve import CurveRecorder

    start = time.perf_counter()
    with timed_method(CurveRecorder, "record") as timing:
        try:
            clbench(arguments)
        except SystemExit as stop:
            if stop.code:
                raise
    wall = time.perf_counter() - start
    per_point = f", {1000 * timing.seconds / timing.calls:.1f} ms a point" if timing.calls else ""
    print(f"clbench {' '.join(arguments)}: {wall:.1f} s; inside CurveRecorder.record {timing.seconds:.2f} s, "
          f"{timing.calls} points{per_point}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
