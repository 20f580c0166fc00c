#!/usr/bin/env bash
# The GPU check of issue 62 on the device machine (docs/speed.md, "GPU check"): clbench from this checkout (no
# install), MNIST from the checkout's .gpu-data/ (filled on the CPU machine by `python tools/gpu_check.py --prepare`
# and carried). Usage: tools/gpu_check.sh OUT [options of tools/gpu_check.py]
set -u
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" "$repo/tools/gpu_check.py" "$@"
