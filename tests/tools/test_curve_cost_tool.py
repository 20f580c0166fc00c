"""tools/curve_cost.py times every call of the method it wraps, and puts the method back."""

from __future__ import annotations

import pytest
from toolloader import load_tool


class Recorder:
    def record(self, value: int) -> int:
        if value < 0:
            raise ValueError(value)
        return 2 * value


def test_every_call_is_counted_and_timed_and_the_method_restored() -> None:
    tool = load_tool("curve_cost")
    ticks = iter([10.0, 10.5, 20.0, 22.0, 30.0, 30.25])  # (start, end) of each call
    original = Recorder.record
    with tool.timed_method(Recorder, "record", clock=lambda: next(ticks)) as timing:
        assert Recorder().record(3) == 6
        assert Recorder().record(4) == 8
        with pytest.raises(ValueError):
            Recorder().record(-1)  # a call that raises still counts
    assert (timing.calls, timing.seconds) == (3, 0.5 + 2.0 + 0.25)
    assert Recorder.record is original
