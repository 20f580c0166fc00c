"""What installing some of clbench's extras adds to an installation of clbench: the packages and their download size.

    python tools/extras_size.py tensorboard,wandb

pip resolves clbench (this checkout) alone and with the extras, each as on an empty environment (`pip install
--dry-run --ignore-installed --report`, from the indexes pip is configured with); the packages of the second
resolution that the first lacks are downloaded (`pip download --no-deps`) into a temporary folder and their files'
sizes summed. It prints one line per package and the total; the numbers move with the versions the indexes hold.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def normalised(name: str) -> str:
    """A distribution's name as PEP 503 compares it (case, `_` and `.` as `-`)."""
    return name.lower().replace("_", "-").replace(".", "-")


def installed(report: Mapping[str, object]) -> dict[str, str]:
    """name -> version of every package a `pip install --report` would install."""
    return {normalised(item["metadata"]["name"]): item["metadata"]["version"]  # type: ignore[index]
            for item in report["install"]}  # type: ignore[attr-defined]


def added(base: Mapping[str, str], extended: Mapping[str, str]) -> dict[str, str]:
    """The packages of `extended` that `base` does not install at the same version, sorted by name."""
    return {name: version for name, version in sorted(extended.items()) if base.get(name) != version}


def resolved(requirement: str, scratch: Path) -> dict[str, str]:
    report = scratch / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                    "--report", str(report), requirement], check=True, stderr=subprocess.DEVNULL)
    return installed(json.loads(report.read_text()))


def downloaded_sizes(packages: Mapping[str, str], folder: Path) -> dict[str, int]:
    """Each package's downloaded file size in bytes (one wheel or source archive each)."""
    pins = [f"{name}=={version}" for name, version in packages.items()]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(folder), *pins],
                   check=True, stderr=subprocess.DEVNULL)
    files = {normalised(path.name.split("-")[0]): path.stat().st_size for path in folder.iterdir()}
    return {name: files[name] for name in packages}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extras", help="comma-separated extras of clbench's pyproject.toml, e.g. tensorboard,wandb")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        base = resolved(str(REPO), Path(scratch))
        extended = resolved(f"{REPO}[{args.extras}]", Path(scratch))
        extra = added(base, extended)
        folder = Path(scratch) / "files"
        folder.mkdir()
        sizes = downloaded_sizes(extra, folder)
    for name, version in extra.items():
        print(f"{name} {version}: {sizes[name] / 1e6:.1f} MB")
    print(f"[{args.extras}] adds {len(extra)} packages, {sum(sizes.values()) / 1e6:.0f} MB to download")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
