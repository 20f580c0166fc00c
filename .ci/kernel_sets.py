"""Print the ATen CPU kernel sets torch offers on this machine, one per line, the native one first.

torch picks its CPU kernels (ATen's vectorised code) by the highest capability the CPU has, and
`ATEN_CPU_CAPABILITY` can lower it; an unknown value, or one the CPU lacks, silently leaves the native one. So a set
is offered when a fresh interpreter asked for it reports it (`torch.backends.cpu.get_cpu_capability()`). The
golden runs (`tests/golden_runs.py`) are checked under each (`.ci/run`): AVX2 is what most laptops run, and its
rounding differs from AVX512's.

Usage: python .ci/kernel_sets.py
"""

from __future__ import annotations

import os
import subprocess
import sys

# ATen's capability names (aten/src/ATen/native/DispatchStub.cpp): x86, then POWER, IBM Z and ARM SVE
CANDIDATES = ("default", "avx2", "avx512", "vsx", "zvector", "sve256")
REPORT = "import torch; print(torch.backends.cpu.get_cpu_capability())"


def capability(requested: str | None) -> str:
    """The capability a fresh interpreter runs on with ATEN_CPU_CAPABILITY=requested (None: unset), upper-case."""
    environment = {key: value for key, value in os.environ.items() if key != "ATEN_CPU_CAPABILITY"}
    if requested is not None:
        environment["ATEN_CPU_CAPABILITY"] = requested
    found = subprocess.run([sys.executable, "-c", REPORT], env=environment, capture_output=True, text=True,
                           check=True)
    return found.stdout.strip().upper()


def offered() -> list[str]:
    """The native kernel set first, then every other one torch accepts here (lower-case, ATEN_CPU_CAPABILITY's)."""
    native = capability(None).lower()
    return [native] + [name for name in CANDIDATES if name != native and capability(name) == name.upper()]


if __name__ == "__main__":
    print("\n".join(offered()))
