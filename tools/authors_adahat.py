"""AdaHAT side by side with its authors' code (CLArena): the mathematics on the same tensors, and whole runs.

    python tools/authors_adahat.py functions --clarena-python /work/authors/adahat/venv/bin/python
    python tools/authors_adahat.py runs --clarena-python ... --clarena-configs /work/authors/adahat/research \
        --tasks 5 --seeds 1,2,3 --mirror /work/shared/data --out /tmp/adahat-sbs [--torch-init]
    python tools/authors_adahat.py summary --clarena-python ... --out /tmp/adahat-sbs --seeds 1,2,3 [--torch-init]

`functions`: random summative masks, training masks, cumulative masks and gradients for CLArena's permuted-MNIST
network (784-256-100-64, every layer gated); CLArena's `AdaHAT.clip_grad_by_adjustment` and its per-layer network
sparsity (`HATMaskSparsityReg`) are called on them in CLArena's interpreter, clbench's
`clbench.approaches.adahat.functions` here, and the adjusted gradients compared (max relative difference).

`runs` (`summary`: the same table from earlier `runs` outputs): CLArena's AdaHAT on its permuted-MNIST experiment
(configs/index/adahat_paper/adahat_pmnist_20tasks.yaml) and
clbench's `adahat` on `tools/authors_adahat_pmnist.yaml` (the same protocol, each value citing its source), seed by
seed in turns, one thread each, both reduced the same way by `--tasks` (the first N permutations); then the final
average accuracy and BWT, mean (std) over seeds, of both. `--torch-init` runs clbench with PyTorch's default
`nn.Linear` initialisation, CLArena's (clbench's networks are Xavier-uniform with zero biases, the HAT paper's).

What it needs (nothing of it is shipped):
- CLArena: `fetch github:pengxiang-wang/continual-learning-arena` at bf58528aab9e010832c4c564fbf0e170b4c3b981, installed
  (`pip install --no-deps -e`) into a venv of its own whose torch is clbench's (a .pth file pointing at clbench's
  site-packages), with lightning, hydra-core, hydra-colorlog, torchmetrics, torchvision (--no-deps, the build for
  clbench's torch), captum, rarfile, gdown, tinyimagenet, scipy, psutil, rich, pyrootutils, typer, pandas,
  matplotlib from PyPI. No patch to CLArena's code.
- Its configs: pengxiang-wang/continual-learning-research at 07c8d26211ea57faf2fdfb18466d3cf3454b36b2, folder
  `configs/` (pass the folder that holds it as --clarena-configs; CLArena reads ./configs from the working folder).
  MNIST's four idx files, uncompressed, in `<configs folder>/data/MNIST/MNIST/raw/` (torchvision's layout); the tool
  puts them there from --mirror.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tools" / "authors_adahat_pmnist.yaml"
EXPERIMENT = "adahat_paper/adahat_pmnist_20tasks"
LAYERS = ((256, 784), (100, 256), (64, 100))  # CLArena's hat_mlp.yaml: fc/0, fc/1, fc/2 weight shapes

CLARENA_FUNCTIONS = r'''
import sys, torch
from clarena.backbones import HATMaskMLP
from clarena.heads import HeadsTIL
from clarena.cl_algorithms import AdaHAT
from clarena.cl_algorithms.regularizers import HATMaskSparsityReg
data = torch.load(sys.argv[1])
backbone = HATMaskMLP(input_dim=784, hidden_dims=[256, 100], output_dim=64, gate="sigmoid")
algorithm = AdaHAT(backbone=backbone, heads=HeadsTIL(input_dim=64), adjustment_mode="adahat",
                   adjustment_intensity=data["alpha"], s_max=400.0, clamp_threshold=50,
                   mask_sparsity_reg_factor=0.1, epsilon=data["epsilon"])
names = backbone.weighted_layer_names
_, sparsity = HATMaskSparsityReg(factor=0.1).original_reg(dict(zip(names, data["masks"])),
                                                          dict(zip(names, data["cumulative"])))
algorithm.summative_mask_for_previous_tasks = dict(zip(names, data["summative"]))
for name, (weight_grad, bias_grad) in zip(names, data["grads"]):
    layer = backbone.get_layer_by_name(name)
    layer.weight.grad, layer.bias.grad = weight_grad.clone(), bias_grad.clone()
algorithm.clip_grad_by_adjustment(network_sparsity=sparsity)
torch.save({"sparsity": [torch.as_tensor(sparsity[name], dtype=torch.float32) for name in names],
            "grads": [(backbone.get_layer_by_name(n).weight.grad, backbone.get_layer_by_name(n).bias.grad)
                      for n in names]}, sys.argv[2])
'''


def case_tensors(seed: int, n_tasks: int) -> dict:
    """A mask history of `n_tasks` finished tasks (binary, as CLArena stores them), a training step's masks and
    gradients, for CLArena's network; alpha 1e-6 to 1."""
    generator = torch.Generator().manual_seed(seed)
    units = [out for out, _ in LAYERS]
    used = 0.3 if seed % 2 == 0 else 0.9  # 0.9: after two tasks few units are free (CLArena's R_l = 0 below 10)
    history = [[(torch.rand(n, generator=generator) < used).float() for n in units] for _ in range(n_tasks)]
    summative = [torch.stack([task[layer] for task in history]).sum(0) for layer in range(len(units))]
    cumulative = [torch.stack([task[layer] for task in history]).amax(0) for layer in range(len(units))]
    masks = [torch.sigmoid(4 * torch.randn(n, generator=generator)) for n in units]
    grads = [(torch.randn(shape, generator=generator), torch.randn(shape[0], generator=generator)) for shape in LAYERS]
    return {"alpha": 1e-6 * 10 ** torch.randint(0, 7, (), generator=generator).item(), "epsilon": 0.1,
            "summative": summative, "cumulative": cumulative, "masks": masks, "grads": grads, "history": history}


def clbench_adjusted(case: dict) -> tuple[list[torch.Tensor], list[tuple[torch.Tensor, torch.Tensor]]]:
    from clbench.approaches.adahat import functions
    from clbench.approaches.hat.functions import LayerShape

    shapes = [LayerShape(f"fc{i + 1}", shape, gated_input=i > 0) for i, shape in enumerate(LAYERS)]
    summative = functions.summative_masks(case["history"])
    sparsity = functions.network_sparsity(case["masks"], case["cumulative"])
    rates = functions.adjustment_rates(functions.parameter_importance(summative, shapes), sparsity, case["alpha"],
                                       case["epsilon"])
    grads = [(w * rw, b * rb) for (w, b), (rw, rb) in zip(case["grads"], rates)]
    return list(sparsity.unbind()), grads


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(((a - b).abs() / b.abs().clamp_min(1e-30)).max())


def compare_functions(clarena_python: str, n_cases: int) -> float:
    """The largest relative difference between CLArena's and clbench's adjusted gradients and sparsities."""
    worst = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for seed in range(n_cases):
            case = case_tensors(seed, n_tasks=1 + seed % 5)
            inputs, outputs = Path(folder) / "in.pt", Path(folder) / "out.pt"
            torch.save(case, inputs)
            subprocess.run([clarena_python, "-c", CLARENA_FUNCTIONS, str(inputs), str(outputs)], check=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
            theirs = torch.load(outputs)
            sparsity, grads = clbench_adjusted(case)
            differences = [relative_difference(a, b) for a, b in zip(sparsity, theirs["sparsity"])]
            differences += [relative_difference(a, b) for pair, other in zip(grads, theirs["grads"])
                            for a, b in zip(pair, other)]
            print(f"case {seed}: {1 + seed % 5} tasks, alpha {case['alpha']:g}: max relative difference "
                  f"{max(differences):.2e}")
            worst = max(worst, *differences)
    return worst


def place_mnist(mirror: Path, configs_root: Path) -> None:
    raw = configs_root / "data" / "MNIST" / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for packed in sorted((mirror / "mnist").glob("*-ubyte.gz")):
        target = raw / packed.name[: -len(".gz")]
        if not target.exists():
            with gzip.open(packed) as source, open(target, "wb") as sink:
                shutil.copyfileobj(source, sink)


def clarena_run(python: str, configs_root: Path, tasks: int, seed: int, out: Path) -> np.ndarray:
    """CLArena's experiment, the first `tasks` permutations, global seed `seed`: its accuracy matrix (T x T)."""
    folder = out / f"clarena-seed{seed}"
    command = [str(Path(python).parent / "clarena"), f"index={EXPERIMENT}", f"train_tasks={tasks}",
               f"eval_after_tasks={tasks}", f"global_seed={seed}", f"expr_name=adahat_sbs_seed{seed}",
               f"output_dir={folder}"]
    with open(out / f"clarena-seed{seed}.log", "w") as log:
        subprocess.run(command, cwd=configs_root, check=True, stdout=log, stderr=subprocess.STDOUT,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    return clarena_matrix(folder)


def clarena_matrix(folder: Path) -> np.ndarray:
    """CLArena's stored accuracy matrix (results/acc.csv: a row per stage, a column per task) in %."""
    with open(folder / "results" / "acc.csv") as handle:
        rows = list(csv.DictReader(handle))
    tasks = len(rows)
    matrix = np.full((tasks, tasks), np.nan)
    for row in rows:
        stage = int(row["after_training_task"])
        for task in range(1, stage + 1):
            matrix[stage - 1, task - 1] = float(row[f"test_on_task_{task}"])
    return matrix * 100


# clbench's CLI with PyTorch's default nn.Linear initialisation (CLArena's) instead of clbench's Xavier-uniform
# weights and zero biases (`clbench.nets.common.MultiHeadNet.reset_parameters`, the HAT paper's).
TORCH_INIT_CLI = ("import sys, clbench.nets.common as common; "
                  "common.MultiHeadNet.reset_parameters = lambda self: None; "
                  "from clbench.cli import app; app(sys.argv[1:])")


def clbench_run(tasks: int, seed: int, out: Path, mirror: Path, torch_init: bool = False) -> np.ndarray:
    """clbench's adahat on the same protocol and reduction: its task-aware test accuracy matrix (T x T)."""
    results = out / ("clbench-torch-init" if torch_init else "clbench")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "CLBENCH_MIRROR": str(mirror)}
    cli = [sys.executable, "-c", TORCH_INIT_CLI] if torch_init else [sys.executable, "-m", "clbench"]
    subprocess.run([*cli, "train", str(SPEC), "-m", "adahat", "--seeds", str(seed), "--set", f"data.n_tasks={tasks}",
                    "--results", str(results)], check=True, env=env, stdout=subprocess.DEVNULL)
    return clbench_matrix(results, seed)


def clbench_matrix(results: Path, seed: int) -> np.ndarray:
    """clbench's stored task-aware test accuracy matrix of the adahat run of `seed` in `results`, in %."""
    import pandas as pd

    from clbench.metrics import accuracy_matrix

    [path] = results.glob(f"*/adahat/*/seed-{seed}/accuracy.parquet")
    rows = pd.read_parquet(path)
    rows = rows[(rows["split"] == "test") & (rows["evaluation"] == "task-aware")]
    return accuracy_matrix(rows[["stage", "task", "accuracy"]]) * 100


def summary(matrices: list[np.ndarray]) -> str:
    from clbench.metrics import backward_transfer

    final = [float(m[-1].mean()) for m in matrices]
    bwt = [backward_transfer(m) for m in matrices]
    return (f"final average accuracy {np.mean(final):.2f} ({np.std(final, ddof=1):.2f}), "
            f"BWT {np.mean(bwt):.2f} ({np.std(bwt, ddof=1):.2f}); per seed {', '.join(f'{v:.2f}' for v in final)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("section", choices=("functions", "runs", "summary"))
    parser.add_argument("--clarena-python", required=True, help="the CLArena venv's python")
    parser.add_argument("--clarena-configs", type=Path, help="the folder that holds the CLArena configs/")
    parser.add_argument("--mirror", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--seeds", default="1,2,3", help="CLArena refuses global_seed 0")
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--torch-init", action="store_true",
                        help="clbench with PyTorch's default Linear init (CLArena's), not its Xavier-uniform one")
    parser.add_argument("--out", type=Path, default=Path("adahat-side-by-side"),
                        help="runs: where both tools write; summary: a folder of earlier `runs` outputs, searched")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.section == "functions":
        worst = compare_functions(args.clarena_python, args.cases)
        print(f"largest relative difference over {args.cases} cases: {worst:.2e}")
        return
    if args.section == "summary":
        seeds = [int(s) for s in args.seeds.split(",")]
        theirs = [clarena_matrix(next(path for path in args.out.rglob(f"clarena-seed{seed}")
                                      if (path / "results" / "acc.csv").exists())) for seed in seeds]
        folder = "clbench-torch-init" if args.torch_init else "clbench"
        ours = [clbench_matrix(next(path for path in args.out.rglob(folder)
                                    if list(path.glob(f"*/adahat/*/seed-{seed}/accuracy.parquet"))), seed)
                for seed in seeds]
        print(f"CLArena adahat: {summary(theirs)}")
        print(f"clbench adahat: {summary(ours)}")
        return
    args.out.mkdir(parents=True, exist_ok=True)
    place_mnist(args.mirror, args.clarena_configs)
    theirs, ours = [], []
    for seed in (int(s) for s in args.seeds.split(",")):
        theirs.append(clarena_run(args.clarena_python, args.clarena_configs, args.tasks, seed, args.out))
        ours.append(clbench_run(args.tasks, seed, args.out, args.mirror, args.torch_init))
        print(f"seed {seed}: CLArena {theirs[-1][-1].mean():.2f}, clbench {ours[-1][-1].mean():.2f}", flush=True)
    print(f"CLArena adahat: {summary(theirs)}")
    print(f"clbench adahat: {summary(ours)}")


if __name__ == "__main__":
    main()
