"""SGD: plain fine-tuning of the whole network on each task in turn (the paper's lower reference)."""

from __future__ import annotations

from clbench.approaches.base import Approach


class SGD(Approach):
    """Cross-entropy on the current task's head; nothing protects earlier tasks.

    The HAT authors' code for this baseline of the paper: joansj/hat@6fd0b9d `src/approaches/sgd.py`.
    """

    name = "sgd"
    summary = "fine-tune everything on each task (Goodfellow et al. 2014)"
