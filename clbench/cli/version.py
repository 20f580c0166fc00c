"""`clbench --version`: the versions a bug report needs. Torch is imported only when the option is given."""

from __future__ import annotations

import platform
import sys

import typer


def version_lines() -> list[str]:
    """clbench's version, torch's and whether CUDA is available to it, and the Python running them."""
    import torch

    from clbench import __version__

    cuda = f"yes ({torch.version.cuda})" if torch.cuda.is_available() else "no"
    return [f"clbench {__version__}", f"torch {torch.__version__}, CUDA available: {cuda}",
            f"Python {platform.python_version()} ({sys.executable})"]


def show_version(value: bool) -> None:
    """The eager `--version` callback: print `version_lines` and exit 0 (nothing else runs)."""
    if value:
        typer.echo("\n".join(version_lines()))
        raise typer.Exit()
