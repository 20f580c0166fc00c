"""Where the tests find the offline mirror of real MNIST and Fashion-MNIST.

`$CLBENCH_MIRROR` when it is set (as clbench itself reads it); `../shared/data` beside the checkout only when the
variable is unset. Tests that need the mirror skip, naming where they looked, when it is not there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

import pytest

MIRROR_ENV = "CLBENCH_MIRROR"
DATA_ENV = "CLBENCH_DATA"
SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def mirror_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$CLBENCH_MIRROR` if set (even if it does not exist: no silent fallback), else ../shared/data."""
    explicit = (os.environ if environ is None else environ).get(MIRROR_ENV)
    return Path(explicit).expanduser() if explicit else SHARED_DATA


def absolute_environment(environ: MutableMapping[str, str]) -> None:
    """Make a relative $CLBENCH_MIRROR (a folder, not a URL) and $CLBENCH_DATA absolute, against the current folder.

    Called once when pytest starts (`conftest.pytest_configure`): tests that change directory then still find
    the mirror and cache the README's `CLBENCH_MIRROR=../shared/data` names.
    """
    for name in (MIRROR_ENV, DATA_ENV):
        value = environ.get(name)
        if value and "://" not in value:
            environ[name] = str(Path(value).expanduser().absolute())


def require_mirror(member: str = "MD5SUMS", environ: Mapping[str, str] | None = None) -> Path:
    """The mirror folder holding `member`; pytest.skip with the place looked at and how to set it otherwise."""
    path = mirror_dir(environ)
    if not (path / member).is_file():
        origin = f"${MIRROR_ENV}" if (os.environ if environ is None else environ).get(MIRROR_ENV) else \
            f"the default (${MIRROR_ENV} unset)"
        pytest.skip(f"offline mirror not present: no {path / member} ({origin}); set {MIRROR_ENV} to the mirror "
                    "folder holding mnist/ and fashion-mnist/")
    return path
