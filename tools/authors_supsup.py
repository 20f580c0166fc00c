"""SupSup side by side: the authors' permuted-MNIST notebook and clbench's `supsup` on the same protocol.

Needs: the authors' repository, RAIVNLab/supsup at commit 6a31878 (`git clone https://github.com/RAIVNLab/supsup`
and `git checkout 6a31878`; not shipped), given as --repo; MNIST's four upstream files (`train-images-idx3-ubyte.gz`,
...) in --mnist (e.g. a clbench mirror's `mnist/` folder); torch and numpy (clbench's environment will do).

The authors' side runs the code cells of their `mnist.ipynb` (the simple GG/GNs example) in this process, as they
are, with these patches (torch 2, no torchvision, one thread, seeds):
- `from tqdm.notebook import tqdm` is replaced by a pass-through `tqdm` and `tqdm.write` by `print` to a null
  stream (cell 1); torchvision is not imported (cell 1).
- cell 8's `MNISTPerm` reads the idx files instead of `torchvision.datasets.MNIST`, with the same transform
  (ToTensor: x / 255; Normalize((0.1307,), (0.3081,)); the task's pixel permutation) and the same loaders
  (training batches of 128, shuffled; test batches of 128) built from tensors; its `update_task(i)` is theirs
  (`np.random.seed(i + seed)`, `np.random.permutation(784)`); the seed is the run's.
- `torch.manual_seed(seed)` before the model is built (the notebook seeds nothing).
- cell 12 (training: 5 tasks, one epoch each, RMSprop lr 1e-4, MultitaskFC(hidden 300), 100 outputs) and cell 15
  (GG: each task with its own masks) run as they are; task-agnostic: their `oneshot_task_inference` (cell 17) on
  each test image alone (`num_examples` 1), the image then classified with the inferred task's masks; correct
  only when the task and the class are both right (their `args.unshared_labels`, `adaptors.py:119-120`). The
  notebook's cell 21 infers once per task from one image and scores the whole task with it; per image is clbench's
  rule and the stricter one.

clbench's side: `clbench train pmnist -m supsup` with every value set to the notebook's (`CLBENCH_SETTINGS`, each
with its cell; the masked output layer's 100 outputs are `supsup.output_size`'s default). Differences that remain:
clbench's permutations are its own (drawn from the seed's `permutations` stream) and its
task order is shuffled; the training batches' order is clbench's.

Output: per tool and seed, the final average accuracy (task-aware = GG, task-agnostic = one-shot per image) and BWT,
then mean (std) over seeds. Runs in one thread (`OMP_NUM_THREADS=1`); about 3 minutes per seed and tool on a CPU
core. `--max-test N` subsamples the authors' task-agnostic pass to the first N test images per task.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

N_TASKS = 5  # mnist.ipynb cell 12: num_tasks = 5
CLBENCH_SETTINGS = [
    f"data.n_tasks={N_TASKS}",               # cell 12: num_tasks = 5
    "network.hidden=[300,300]",             # cell 12: MultitaskFC(hidden_size=300)
    "data.validation_fraction=0",           # cell 8: trains on all 60,000 training images
    "training.early_stopping=false",        # cell 12: a fixed number of epochs
    "supsup.training.early_stopping=false",
    "supsup.training.max_epochs=1",         # cell 12: for e in range(1)
    "supsup.training.batch_size=128",       # cell 8: batch_size=128
    "supsup.training.lr=0.0001",            # cell 12: RMSprop(lr=1e-4)
    "supsup.training.optimizer=rmsprop",    # cell 12: optim.RMSprop
    "supsup.mask=threshold",                # cell 3: GetSubnet = scores >= 0
]


def read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        data = handle.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def notebook_cells(repo: Path) -> list[str]:
    notebook = json.loads((repo / "mnist.ipynb").read_text())
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]


def patched_mnistperm(mnist: Path):  # type: ignore[no-untyped-def]
    """cell 8's MNISTPerm without torchvision (the patch in the module docstring)."""
    import torch

    images = {split: torch.from_numpy(read_idx(mnist / f"{prefix}-images-idx3-ubyte.gz").copy()).float() / 255
              for split, prefix in (("train", "train"), ("test", "t10k"))}
    labels = {split: torch.from_numpy(read_idx(mnist / f"{prefix}-labels-idx1-ubyte.gz").astype(np.int64))
              for split, prefix in (("train", "train"), ("test", "t10k"))}

    class Permuted(torch.utils.data.Dataset):
        def __init__(self, split: str, owner) -> None:  # type: ignore[no-untyped-def]
            self.x = ((images[split] - 0.1307) / 0.3081).view(-1, 784)
            self.y, self.owner = labels[split], owner

        def __len__(self) -> int:
            return len(self.y)

        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            return self.x[index][self.owner.perm].view(1, 28, 28), self.y[index]

    class MNISTPerm:
        def __init__(self, seed: int = 0) -> None:
            self.seed, self.perm = seed, np.arange(784)
            self.train_loader = torch.utils.data.DataLoader(Permuted("train", self), batch_size=128, shuffle=True)
            self.val_loader = torch.utils.data.DataLoader(Permuted("test", self), batch_size=128, shuffle=False)

        def update_task(self, i: int) -> None:
            np.random.seed(i + self.seed)
            self.perm = torch.from_numpy(np.random.permutation(784))

    return MNISTPerm


def run_authors(repo: Path, mnist: Path, seed: int, max_test: int | None) -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    cells = notebook_cells(repo)
    null = io.StringIO()

    def tqdm(iterable, *args, **kwargs):  # type: ignore[no-untyped-def]  # noqa: ARG001
        return iterable

    tqdm.write = lambda *args, **kwargs: None  # type: ignore[attr-defined]
    namespace: dict = {"__name__": "supsup_notebook", "tqdm": tqdm}
    imports = cells[0].replace("import torchvision\n", "").replace("from tqdm.notebook import tqdm", "")
    exec(imports, namespace)  # noqa: S102
    for index in (1, 2, 3, 5):  # notebook cells 3 (layers), 4 (utilities), 6 (model), 10 (train/evaluate)
        exec(cells[index], namespace)  # noqa: S102
    exec(cells[8], namespace)  # cell 17: oneshot_task_inference  # noqa: S102
    namespace["MNISTPerm"] = patched_mnistperm(mnist)
    namespace["mnist"] = namespace["MNISTPerm"](seed=seed)
    namespace["clear_output"] = lambda: None
    torch.manual_seed(seed)
    training = cells[6].replace("from IPython.display import clear_output\n", "")
    stdout, sys.stdout = sys.stdout, null
    try:
        exec(training, namespace)  # cell 12  # noqa: S102
        exec(cells[7], namespace)  # cell 15: GG  # noqa: S102
    finally:
        sys.stdout = stdout
    aware = [float(a) for a in namespace["gg_performance"]]
    return {"task-aware": float(np.mean(aware)), **per_image_inference(namespace, max_test)}


def per_image_inference(namespace: dict, max_test: int | None) -> dict[str, float]:
    """Each test image alone: their oneshot_task_inference, then their masks of the inferred task. Returns the
    task-agnostic accuracy, the task-inference accuracy and the task-aware accuracy on the same images."""
    import torch

    model, mnist = namespace["model"], namespace["mnist"]
    agnostic, inferred_right, aware = [], [], []
    for task in range(N_TASKS):
        mnist.update_task(task)
        right = task_right = own_right = seen = 0
        for batch, labels in mnist.val_loader:
            for image, label in zip(batch, labels):
                if max_test is not None and seen >= max_test:
                    break
                inferred = namespace["oneshot_task_inference"](model, image[None], N_TASKS)
                namespace["set_model_task"](model, inferred, verbose=False)
                with torch.no_grad():
                    predicted = int(model(image[None]).argmax(dim=-1))
                    namespace["set_model_task"](model, task, verbose=False)
                    own = int(model(image[None]).argmax(dim=-1))
                right += int(inferred == task and predicted == int(label))
                task_right += int(inferred == task)
                own_right += int(own == int(label))
                seen += 1
        agnostic.append(right / seen)
        inferred_right.append(task_right / seen)
        aware.append(own_right / seen)
    return {"task-agnostic": float(np.mean(agnostic)), "task inferred": float(np.mean(inferred_right)),
            "task-aware, same images": float(np.mean(aware))}


def run_clbench(mnist_mirror: Path, seed: int, results: Path) -> dict[str, float]:
    import pandas as pd

    options = [item for setting in CLBENCH_SETTINGS for item in ("--set", setting)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "clbench", "train", "pmnist", "-m", "supsup", "--seeds", str(seed),
                    "--results", str(results), "--mirror", str(mnist_mirror), "--device", "cpu", *options],
                   check=True, env=env)
    rows = pd.concat(pd.read_parquet(path) for path in results.rglob("accuracy.parquet"))
    rows = rows[(rows["seed"] == seed) & (rows["split"] == "test")]
    final = rows[rows["stage"] == N_TASKS]
    out = {evaluation: float(final[final["evaluation"] == evaluation]["accuracy"].mean())
           for evaluation in ("task-aware", "task-agnostic")}
    aware = rows[rows["evaluation"] == "task-aware"]
    diagonal = [float(aware[(aware["stage"] == u) & (aware["task"] == u)]["accuracy"].iloc[0])
                for u in range(1, N_TASKS)]
    last = [float(final[(final["evaluation"] == "task-aware") & (final["task"] == u)]["accuracy"].iloc[0])
            for u in range(1, N_TASKS)]
    out["bwt"] = float(np.mean(np.subtract(last, diagonal)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="RAIVNLab/supsup checkout at 6a31878")
    parser.add_argument("--mirror", type=Path, required=True, help="folder holding mnist/<upstream files>")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--tools", default="authors,clbench")
    parser.add_argument("--max-test", type=int, default=None)
    parser.add_argument("--results", type=Path, default=None, help="clbench results folder (default: a temp one)")
    args = parser.parse_args()
    results = args.results or Path(tempfile.mkdtemp(prefix="supsup-side-by-side-"))
    table: dict[str, list[dict[str, float]]] = {}
    for seed in (int(s) for s in args.seeds.split(",")):
        for tool in args.tools.split(","):
            if tool == "authors":
                numbers = run_authors(args.repo, args.mirror / "mnist", seed, args.max_test)
            else:
                numbers = run_clbench(args.mirror, seed, results)
            table.setdefault(tool, []).append(numbers)
            print(json.dumps({"tool": tool, "seed": seed, **numbers}), flush=True)
    for tool, runs in table.items():
        for key in runs[0]:
            values = [run[key] for run in runs]
            spread = np.std(values, ddof=1) if len(values) > 1 else 0.0
            print(f"{tool} {key}: {100 * np.mean(values):.2f} ({100 * spread:.2f})")


if __name__ == "__main__":
    main()
