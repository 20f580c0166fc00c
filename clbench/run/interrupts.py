"""Holding Ctrl-C back while writes that belong together land."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM held back: one that arrives meanwhile is raised again right after the
    block, to the handler that was in place (Ctrl-C's KeyboardInterrupt, a worker's, or the default).

    Python runs signal handlers in the main thread only, so elsewhere (a thread of Ray's, say) the block runs
    unprotected, as any other code there.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {number: signal.signal(number, lambda signum, frame: received.append(signum))
                for number in HELD_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
    if received:
        signal.raise_signal(received[0])
