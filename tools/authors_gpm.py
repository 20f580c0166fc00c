"""GPM side by side: the authors' permuted-MNIST script and clbench's `gpm` on the same protocol, seed by seed.

The authors' code is not shipped. Fetch it outside this repository and point --authors at it:

    git clone https://github.com/sahagobinda/GPM /work/authors/gpm/GPM
    git -C /work/authors/gpm/GPM checkout 1a238ec9d2ca30bae8fd1707f161cc6bd093c72a

and give --python an interpreter with torch, numpy and scikit-learn (its data loader's `sklearn.utils.shuffle`).
Their code is run unmodified (main_pmnist.py through `runpy`, as `python main_pmnist.py --seed S`); this tool only
supplies, in a temporary folder on the path:
- `torchvision` (`datasets.MNIST` reading the idx files of --mirror, `transforms.ToTensor`/`Normalize`/`Compose`);
- the permuted data cache (./data/binary_pmnist) that dataloader/pmnist.py:21-54 writes on its first run, written
  before it runs, vectorised (its per-image `shuffle(aux, random_state=r*100+i)` is one pixel permutation per task;
  one image at a time through a DataLoader took about 10 minutes per seed here); the loader then reads it;
- `seaborn` and `matplotlib.pyplot` that draw nothing; the heat map's data (the accuracy matrix, main_pmnist.py:
  316-320) is what the runner saves;
- with --train-samples N, `dataloader.pmnist.get` wrapped to keep a random (seeded) 90% x N of each task's
  training images and 10% x N of its validation images (the same reduction as clbench's
  `data.max_train_samples=N` with `validation_fraction` 0.1); test sets are kept whole.
Each seed runs in its own working folder, so that the authors' cache of permuted data (./data/binary_pmnist, named
by permutation only) is built for that seed's task order. One thread (OMP_NUM_THREADS=1, torch.set_num_threads(1)).

clbench runs `clbench train pmnist -m gpm` with the authors' protocol set by `AUTHORS_PROTOCOL` (each value's source
beside it), with the same seeds and reduction. Both tools' final average accuracy (mean of the last row, %) and BWT
(mean over the first T-1 tasks of last row minus diagonal, main_pmnist.py:310-311) per seed, then mean (std):

    OMP_NUM_THREADS=1 python tools/authors_gpm.py --authors /work/authors/gpm/GPM \
        --python /work/authors/gpm/venv/bin/python --mirror /work/shared/data --seeds 0,1,2 --train-samples 20000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

SHIM_TORCHVISION = '''
import gzip, pathlib
import numpy as np
import torch

MIRROR = pathlib.Path({mirror!r}) / "mnist"


def _idx(name):
    with gzip.open(MIRROR / name, "rb") as handle:
        data = handle.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


class _Compose:
    def __init__(self, steps):
        self.steps = steps

    def __call__(self, x):
        for step in self.steps:
            x = step(x)
        return x


class _ToTensor:
    def __call__(self, image):
        return torch.from_numpy(image.astype(np.float32) / 255.0).unsqueeze(0)


class _Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean[0], std[0]

    def __call__(self, x):
        return (x - self.mean) / self.std


class _MNIST(torch.utils.data.Dataset):
    def __init__(self, root, train=True, download=False, transform=None):
        prefix = "train" if train else "t10k"
        self.images = _idx(prefix + "-images-idx3-ubyte.gz")
        self.labels = _idx(prefix + "-labels-idx1-ubyte.gz").astype(np.int64)
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.transform(self.images[index]), int(self.labels[index])


class transforms:  # noqa: N801
    Compose, ToTensor, Normalize = _Compose, _ToTensor, _Normalize


class datasets:  # noqa: N801
    MNIST = _MNIST
'''

RUNNER = '''
import json, runpy, sys, types
import numpy as np
import torch

torch.set_num_threads(1)
authors, seed, train_samples, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
sys.path.insert(0, authors)
saved = {{}}
seaborn = types.ModuleType("seaborn")
seaborn.set = lambda **kwargs: None
seaborn.heatmap = lambda frame, **kwargs: saved.setdefault("matrix", np.asarray(frame, dtype=float).tolist())
pyplot = types.ModuleType("matplotlib.pyplot")
pyplot.show = lambda *args, **kwargs: None
matplotlib = types.ModuleType("matplotlib")
matplotlib.pyplot = pyplot
sys.modules.update({{"seaborn": seaborn, "matplotlib": matplotlib, "matplotlib.pyplot": pyplot}})

from dataloader import pmnist  # noqa: E402
from sklearn.utils import shuffle  # noqa: E402
import torchvision  # noqa: E402  (the shim)


def build_cache(seed):
    """./data/binary_pmnist as dataloader/pmnist.py:21-54 writes it for this seed, vectorised: its per-image
    `shuffle(aux, random_state=r*100+i)` is one permutation per task (the same random_state for every image)."""
    import os
    os.makedirs("./data/binary_pmnist")
    order = shuffle(np.array(list(range(10)), dtype=int), random_state=seed)
    normalize = torchvision.transforms.Normalize((0.1307,), (0.3081,))
    for s in ["train", "test"]:
        raw = torchvision.datasets.MNIST("./data/", train=s == "train")
        x = normalize(torch.from_numpy(raw.images.astype(np.float32) / 255.0)).reshape(-1, 784)
        for i, r in enumerate(order):
            perm = shuffle(np.arange(784), random_state=r * 100 + i)
            torch.save(x[:, perm].reshape(-1, 1, 28, 28).clone(), "./data/binary_pmnist/data" + str(r) + s + "x.bin")
            torch.save(torch.LongTensor(raw.labels), "./data/binary_pmnist/data" + str(r) + s + "y.bin")


build_cache(seed)

original_get = pmnist.get


def reduced_get(seed=0, fixed_order=False, pc_valid=0.1):
    data, taskcla, size = original_get(seed=seed, fixed_order=fixed_order, pc_valid=pc_valid)
    if train_samples > 0:
        rng = np.random.RandomState(1000 + seed)
        n_valid = int(round(pc_valid * train_samples))
        for t, _ in taskcla:
            for split, n in (("train", train_samples - n_valid), ("valid", n_valid)):
                keep = torch.LongTensor(rng.permutation(data[t][split]["x"].size(0))[:n])
                data[t][split]["x"] = data[t][split]["x"][keep].clone()
                data[t][split]["y"] = data[t][split]["y"][keep].clone()
    return data, taskcla, size


pmnist.get = reduced_get
sys.argv = ["main_pmnist.py", "--seed", str(seed)]
runpy.run_path(authors + "/main_pmnist.py", run_name="__main__")
json.dump(saved, open(out, "w"))
'''


# The GPM authors' permuted MNIST protocol (sahagobinda/GPM@1a238ec), as `clbench train --set` overrides of pmnist.
# Differences left: clbench's layers have biases (gpm trains them on the first task only) and Xavier-uniform
# initialisation (the authors' layers: no biases, torch's default init); clbench's validation split is a seeded
# stratified draw (the authors': the first 10%, which their pmnist loop only prints).
AUTHORS_PROTOCOL = (
    "data.scenario=domain",           # one 10-way head shared by every task: main_pmnist.py:31, :63-64
    "data.validation_fraction=0.1",   # main_pmnist.py:335 pc_valid 0.1; dataloader/pmnist.py:70-82
    "training.lr=0.01",               # main_pmnist.py:338
    "training.batch_size=10",         # main_pmnist.py:327
    "training.max_epochs=5",          # main_pmnist.py:331; every epoch runs, no lr schedule: :244-255, :273-284
    "training.early_stopping=false",  # the last weights kept (no best-weights restore in main_pmnist.py)
    "network.hidden=[100,100]",       # main_pmnist.py:349 n_hidden 100, two hidden layers (:29-31)
)


def final_accuracy_and_bwt(matrix: np.ndarray) -> tuple[float, float]:
    """(mean of the last row, mean over the first T-1 tasks of last row minus diagonal), as main_pmnist.py:310-311."""
    return float(matrix[-1].mean()), float(np.mean((matrix[-1] - np.diag(matrix))[:-1]))


def run_authors(args: argparse.Namespace, seed: int, shims: Path) -> np.ndarray:
    """The authors' main_pmnist.py for one seed in a fresh working folder; its accuracy matrix (%)."""
    with tempfile.TemporaryDirectory(prefix=f"gpm-authors-{seed}-") as work:
        out = Path(work) / "matrix.json"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(shims)}
        with open(args.log_dir / f"authors-seed{seed}.log", "w") as log:
            subprocess.run([args.python, str(shims / "runner.py"), str(args.authors), str(seed),
                            str(args.train_samples), str(out)], cwd=work, env=env, check=True, stdout=log,
                           stderr=subprocess.STDOUT)
        return np.array(json.loads(out.read_text())["matrix"])


def run_clbench(args: argparse.Namespace, seed: int) -> np.ndarray:
    """`clbench train pmnist -m gpm` on the authors' protocol for one seed; its test accuracy matrix (%)."""
    import pandas as pd

    from clbench.metrics import accuracy_matrix

    results = args.log_dir / "clbench-results"
    command = [sys.executable, "-m", "clbench", "train", "pmnist", "-m", "gpm", "--seeds", str(seed),
               *[word for value in AUTHORS_PROTOCOL for word in ("--set", value)], "--results", str(results),
               "--device", "cpu"]
    if args.train_samples > 0:
        command += ["--set", f"data.max_train_samples={args.train_samples}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CLBENCH_MIRROR": str(args.mirror)}
    with open(args.log_dir / f"clbench-seed{seed}.log", "w") as log:
        subprocess.run(command, env=env, check=True, stdout=log, stderr=subprocess.STDOUT)
    [path] = [p for p in results.glob(f"pmnist/gpm/*/seed-{seed}/accuracy.parquet")
              if json.loads((p.parent / "run.json").read_text())["config"]["data"].get("max_train_samples")
              == (args.train_samples or None)]
    rows = pd.read_parquet(path)
    rows = rows[(rows["split"] == "test") & (rows["evaluation"] == "task-aware")]
    return 100 * accuracy_matrix(rows)


def summary(name: str, values: list[tuple[float, float]]) -> str:
    accuracy, bwt = np.array(values).T
    ddof = 1 if len(values) > 1 else 0
    return (f"{name}: final average accuracy {accuracy.mean():.2f} ({accuracy.std(ddof=ddof):.2f}), "
            f"BWT {bwt.mean():.2f} ({bwt.std(ddof=ddof):.2f}) over {len(values)} seeds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authors", type=Path, required=True, help="sahagobinda/GPM at 1a238ec, extracted")
    parser.add_argument("--python", required=True, help="interpreter for the authors' code (torch, sklearn)")
    parser.add_argument("--mirror", type=Path, default=Path("/work/shared/data"), help="folder with mnist/*.gz")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--train-samples", type=int, default=0, help="training images per task (0: all 60000)")
    parser.add_argument("--log-dir", type=Path, default=Path("gpm-side-by-side"))
    parser.add_argument("--only", choices=["authors", "clbench"], default=None)
    args = parser.parse_args()
    args.log_dir.mkdir(parents=True, exist_ok=True)
    shims = args.log_dir / "shims"
    shims.mkdir(exist_ok=True)
    (shims / "torchvision.py").write_text(textwrap.dedent(SHIM_TORCHVISION.format(mirror=str(args.mirror))))
    (shims / "runner.py").write_text(RUNNER.format())
    found: dict[str, list[tuple[float, float]]] = {"authors": [], "clbench": []}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for tool in ("authors", "clbench"):  # in turns, so that background load hits both alike
            if args.only not in (None, tool):
                continue
            matrix = run_authors(args, seed, shims) if tool == "authors" else run_clbench(args, seed)
            found[tool].append(final_accuracy_and_bwt(matrix))
            np.savetxt(args.log_dir / f"{tool}-seed{seed}.txt", matrix, fmt="%.2f")
            print(f"{tool} seed {seed}: final average accuracy {found[tool][-1][0]:.2f}, BWT {found[tool][-1][1]:.2f}",
                  flush=True)
    for tool, values in found.items():
        if values:
            print(summary(tool, values))


if __name__ == "__main__":
    main()
