"""Class-incremental methods side by side: FACIL's implementation and clbench's on one FACIL-style MNIST protocol.

FACIL is not shipped. Fetch it outside this repository, at the commit clbench's methods were read at, into a folder
of its own (this tool patches that copy):

    git clone https://github.com/mmasana/FACIL DIR && git -C DIR checkout e09d2c8

and give --facil-python an interpreter with torch, torchvision and numpy (FACIL's requirements; matplotlib only for
its --last-layer-analysis, not used). `--prepare-facil` (idempotent) makes DIR runnable here, touching no method:
- data: FACIL's `src/datasets/dataset_config.py` reads MNIST from `../data/mnist` relative to `src/` (its working
  folder) through torchvision's MNIST class, i.e. the four idx files, gunzipped, in DIR/data/mnist/MNIST/raw/; they
  are gunzipped there from --mirror (MNIST's `*-ubyte.gz` under MIRROR/mnist/);
- patch 1, `src/datasets/dataset_config.py`: 'mnist' gets `'class_order': list(range(10))`, the digits in order
  (0-1, 2-3, ...) as clbench's seq-mnist spec (`data.shuffle_tasks: false`); FACIL shuffles the classes by the seed
  when a data set names no order (`src/datasets/memory_dataset.py` `get_data`);
- patch 2, `src/networks/mlp.py` (new) and `src/networks/__init__.py`: `MLP`, 784-100-100 with ReLU and its head
  `fc` (FACIL's `head_var`), the body of clbench's seq-mnist spec (Mammoth's MNISTMLP) with clbench's initialisation
  (Xavier-uniform weights, zero biases: the same network, not only the same shape); FACIL's own MNIST network is a
  LeNet, which clbench does not have;
- patch 3, `src/datasets/exemplars_selection.py` `HerdingExemplarsSelector`: the loop over a class's samples that
  finds the next exemplar (one `torch.norm` per sample and step, ~200 s a task on this CPU) as one vectorised norm
  and argmin over the samples not chosen yet: the same distance, the same first minimum, the same exemplars;
- patch 4, `src/approach/lucir.py` `criterion`: the margin ranking loss's target of ones shaped (N, 1) like its
  inputs; torch >= 2 refuses FACIL's (N,) ("All input tensors should have same dimension"); the same values.
- patch 5, `src/approach/bic.py` `BiasLayer`: alpha and beta created without `device="cuda"` (FACIL moves the
  layer to its device right after, `BiasLayer().to(self.device)`), so that it runs on a CPU.

The protocol (FACIL_COMMON and CLBENCH_COMMON, the same in both): MNIST in 5 tasks of 2 digits in order, 10% of
each task's training set held out for validation, the MLP above, plain SGD (momentum 0, weight decay 0, FACIL's
main_incremental.py defaults), lr 0.1 (main_incremental.py default) divided by 3 (--lr-factor 3) after 5 epochs
without a lower validation loss (--lr-patience 5), the task stopped when the lr falls below 1e-4, the best
validation weights restored (FACIL's `Inc_Learning_Appr.train_loop`, clbench's `PlateauSchedule`), gradient norm
clipped at 10000 (--clipping default), batch 64 (--batch-size default), at most --epochs epochs per task (FACIL's
default, 200, is reduced the same way in both tools to fit a CPU; say which in what you report). FACIL's
task-agnostic accuracy (TAg) is the argmax over every head so far, its task-aware (TAw) the argmax in the task's
head: clbench's task-agnostic (class-IL) and task-aware (task-IL) rows.

For each method and seed, in turns (so that background load hits both alike), on one CPU thread (OMP_NUM_THREADS=1;
FACIL sets no thread count of its own):
- FACIL: `python -u main_incremental.py` from DIR/src with FACIL_COMMON, --seed S and the method's `facil`
  arguments below; the final accuracies are the last entries of results/avg_accs_tag-*.txt and avg_accs_taw-*.txt
  that its disk logger writes under the run's own --results-path;
- clbench: `clbench train SPEC -m METHOD --seeds S` with CLBENCH_COMMON and the method's `clbench` --set values;
  the final accuracies are the last stage's task-agnostic and task-aware test rows.
Then per tool: class-IL (TAg) and task-IL (TAw) final average accuracy, mean (std over seeds, ddof 1) and the
median seconds per run (wall time of the subprocess, start-up included).

    OMP_NUM_THREADS=1 python tools/side_by_side_facil.py --facil /work/authors/facil-NAME --prepare-facil \\
        --facil-python /work/authors/venv-mammoth/bin/python --methods lucir --seeds 0,1,2 --epochs 10

A method's entry in METHODS states both tools' arguments; every value cites where it was read.
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from side_by_side_common import REPO, gunzip_mnist, in_turns, run_clbench, table_row, timed, unknown_methods, verdict

SPEC = "seq-mnist"  # clbench's base spec (MNIST, 5 tasks of 2 digits in order, 784-100-100, class scenario)


def facil_common(epochs: int) -> list[str]:
    """FACIL's main_incremental.py arguments of the protocol (the module docstring says where each is read)."""
    return ["--datasets", "mnist", "--num-tasks", "5", "--network", "MLP", "--batch-size", "64",
            "--nepochs", str(epochs), "--lr", "0.1", "--lr-factor", "3", "--lr-patience", "5", "--lr-min", "1e-4",
            "--momentum", "0", "--weight-decay", "0", "--clipping", "10000", "--num-workers", "0"]


def clbench_common(epochs: int) -> list[str]:
    """clbench's --set values that turn the seq-mnist spec into the same protocol."""
    return ["data.validation_fraction=0.1", "training.early_stopping=true", f"training.max_epochs={epochs}",
            "training.lr=0.1", "training.lr_factor=3", "training.patience=5", "training.lr_min=0.0001",
            "training.batch_size=64", "training.class_loss=seen"]


@dataclass(frozen=True)
class Method:
    """One method's arguments in both tools."""

    facil_approach: str                                  # FACIL's --approach (its src/approach/<name>.py)
    facil: Callable[[int], list[str]]                    # FACIL's arguments beyond facil_common (buffer size)
    clbench: Callable[[int], list[str]]                  # clbench's --set values beyond clbench_common (buffer size)
    note: str = ""                                       # where the values come from


METHODS: dict[str, Method] = {
    # FACIL src/approach/lucir.py extra_parser defaults: --lamb 5 (lamb_base), --lamb-mr 1, --dist 0.5 (margin m),
    # --K 2; exemplars: a fixed memory of `buffer` samples (--num-exemplars) chosen by herding
    # (src/datasets/exemplars_dataset.py --exemplar-selection). FACIL's lucir has no weight imprinting and no
    # class-balanced finetuning: clbench's imprint false, finetune_epochs 0.
    "lucir": Method("lucir",
                    lambda b: ["--num-exemplars", str(b), "--exemplar-selection", "herding", "--lamb", "5",
                               "--lamb-mr", "1", "--dist", "0.5", "--K", "2"],
                    lambda b: [f"lucir.buffer_size={b}", "lucir.lamb_base=5", "lucir.lamb_mr=1", "lucir.margin=0.5",
                               "lucir.k=2", "lucir.imprint=false", "lucir.finetune_epochs=0",
                               "lucir.clip_grad_norm=10000"],
                    "FACIL src/approach/lucir.py extra_parser defaults"),
    # FACIL src/approach/bic.py extra_parser defaults: --lamb -1 (lambda = old / seen classes), --T 2,
    # --val-exemplar-percentage 0.1, --num-bias-epochs 200; train_loop's bias fit: SGD at the network's lr (0.1 here),
    # momentum 0.9, 0.1 x beta^2 / 2; exemplars: a fixed memory of `buffer` samples chosen by herding. clbench's
    # seq-mnist bic section has Mammoth's bias fit and lr 0.03: FACIL's values are set here, the lr on bic's own
    # section (it takes precedence over training.lr). FACIL's stage 3 (`collect_exemplars` over the loader of the
    # task's data and the exemplars together) herds again among an earlier class's stored exemplars with the current
    # network: clbench's reselect_old true.
    "bic": Method("bic",
                  lambda b: ["--num-exemplars", str(b), "--exemplar-selection", "herding", "--lamb", "-1", "--T", "2",
                             "--val-exemplar-percentage", "0.1", "--num-bias-epochs", "200"],
                  lambda b: [f"bic.buffer_size={b}", "bic.lamb=-1", "bic.temperature=2", "bic.val_fraction=0.1",
                             "bic.bias_epochs=200", "bic.bias_optimizer=sgd", "bic.bias_lr=0", "bic.bias_momentum=0.9",
                             "bic.beta_l2=0.1", "bic.selection=herding", "bic.reselect_old=true",
                             "bic.clip_grad_norm=10000", "bic.training.lr=0.1"],
                  "FACIL src/approach/bic.py extra_parser defaults"),
}


# ------------------------------------------------------------------------------------------------------- FACIL
MLP_SOURCE = '''from torch import nn


class MLPArch(nn.Module):
    """784-100-100 with ReLU and a linear head `fc` (clbench's seq-mnist body; added by clbench's side-by-side tool)."""

    def __init__(self, num_classes=10, **kwargs):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(784, 100), nn.ReLU(), nn.Linear(100, 100), nn.ReLU())
        self.fc = nn.Linear(100, num_classes)
        self.head_var = 'fc'
        for module in self.modules():  # clbench's initialisation (clbench/nets/common.py reset_parameters)
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x):
        return self.fc(self.body(x))


def MLP(pretrained=False, **kwargs):
    return MLPArch(**kwargs)
'''
PATCHES = [  # (file under DIR/src, text, its replacement): the two patches of the docstring
    ("datasets/dataset_config.py", "'normalize': ((0.1307,), (0.3081,)),\n",
     "'normalize': ((0.1307,), (0.3081,)),\n        'class_order': list(range(10)),\n"),
    ("networks/__init__.py", "from .resnet32 import resnet32\n",
     "from .resnet32 import resnet32\nfrom .mlp import MLP\n"),
    ("networks/__init__.py", "['resnet32', 'LeNet', 'VggNet']", "['resnet32', 'LeNet', 'VggNet', 'MLP']"),
    ("datasets/exemplars_selection.py",
     """                for item in cls_ind:
                    if item not in selected:
                        feat = extracted_features[item]
                        dist = torch.norm(cls_mu - feat / (k + 1) - sum_others)
                        if dist < dist_min:
                            dist_min = dist
                            newone = item
                            newonefeat = feat
""",
     """                candidates = [item for item in cls_ind if item not in selected]
                dists = torch.norm(cls_mu - extracted_features[candidates] / (k + 1) - sum_others, dim=1)
                newone = candidates[int(torch.argmin(dists))]
                newonefeat = extracted_features[newone]
"""),
    ("approach/lucir.py", "torch.ones(hard_num * self.K).to(self.device))",
     "torch.ones(hard_num * self.K, 1).to(self.device))"),
    ("approach/bic.py", 'torch.ones(1, requires_grad=False, device="cuda")', "torch.ones(1, requires_grad=False)"),
    ("approach/bic.py", 'torch.zeros(1, requires_grad=False, device="cuda")', "torch.zeros(1, requires_grad=False)"),
]


def prepare_facil(facil: Path, mirror: Path) -> None:
    """MNIST's idx files gunzipped into DIR/data/mnist/MNIST/raw, and the two patches applied (once)."""
    gunzip_mnist(mirror, facil / "data" / "mnist" / "MNIST" / "raw")
    (facil / "src" / "networks" / "mlp.py").write_text(MLP_SOURCE)
    for name, old, new in PATCHES:
        path = facil / "src" / name
        text = path.read_text()
        if new not in text:
            if old not in text:
                raise SystemExit(f"{path}: cannot patch, {old!r} not found (is it FACIL e09d2c8?)")
            path.write_text(text.replace(old, new, 1))


def facil_final(results: Path, name: str) -> float:
    """The last entry (%) of FACIL's results/<name>-*.txt (the average accuracy after each task, as fractions)."""
    [path] = list(results.glob(f"*/results/{name}-*.txt"))
    values = path.read_text().split()
    return 100 * float(values[-1])


def run_facil(args: argparse.Namespace, method: Method, seed: int) -> tuple[float, float, float]:
    """(class-IL %, task-IL %, wall seconds) of one FACIL run."""
    results = args.log_dir / "facil" / f"{method.facil_approach}-b{args.buffer}-s{seed}"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    command = [args.facil_python, "-u", "main_incremental.py", *facil_common(args.epochs), "--approach",
               method.facil_approach, *method.facil(args.buffer), "--seed", str(seed), "--results-path", str(results)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    seconds = timed(command, env, args.facil / "src", results / "log.txt")
    return facil_final(results, "avg_accs_tag"), facil_final(results, "avg_accs_taw"), seconds


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facil", type=Path, required=True, help="a copy of mmasana/FACIL at e09d2c8 (patched)")
    parser.add_argument("--facil-python", required=True, help="interpreter with torch, torchvision, numpy")
    parser.add_argument("--mirror", type=Path, default=REPO.parent / "shared" / "data", help="folder with mnist/*.gz")
    parser.add_argument("--methods", default="lucir", help=f"comma-separated, of {', '.join(METHODS)}")
    parser.add_argument("--buffer", type=int, default=500, help="memory size in samples (FACIL's --num-exemplars)")
    parser.add_argument("--epochs", type=int, default=200, help="at most this many epochs per task, in both tools")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--log-dir", type=Path, default=Path("side-by-side-facil"))
    parser.add_argument("--only", choices=["facil", "clbench"], default=None)
    parser.add_argument("--prepare-facil", action="store_true", help="gunzip MNIST into DIR and apply the patches")
    args = parser.parse_args(argv)
    args.facil, args.log_dir = args.facil.resolve(), args.log_dir.resolve()
    problem = unknown_methods(args.methods, list(METHODS))
    if problem:
        parser.error(problem)
    if args.prepare_facil:
        prepare_facil(args.facil, args.mirror)
    lines = ["| method | tool | class-IL (TAg) % | task-IL (TAw) % | seconds per run |", "|---|---|---|---|---|"]
    verdicts = []
    for name in args.methods.split(","):
        method = METHODS[name]
        found = in_turns(name, [int(s) for s in args.seeds.split(",")], {
            "FACIL": lambda seed, method=method: run_facil(args, method, seed),
            "clbench": lambda seed, name=name, method=method: run_clbench(
                args.log_dir / "clbench" / f"{name}-b{args.buffer}-s{seed}", SPEC, name, seed,
                [*clbench_common(args.epochs), *method.clbench(args.buffer)], args.mirror)}, args.only).found
        lines += [table_row(tool, name, values) for tool, values in found.items() if values]
        if all(found.values()):
            verdicts.append(f"{name}, buffer {args.buffer}, {args.epochs} epochs at most: clbench's class-IL mean "
                            f"{verdict([v[0] for v in found['clbench']], [v[0] for v in found['FACIL']])}")
    print("\n".join(lines + [""] + verdicts))


if __name__ == "__main__":
    main()
