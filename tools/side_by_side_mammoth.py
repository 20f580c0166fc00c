"""Class-incremental methods side by side: Mammoth's implementation and clbench's on Mammoth's seq-MNIST, seed by seed.

Mammoth is not shipped. Fetch it outside this repository, at the commit the shipped seq-mnist spec was read at:

    git clone https://github.com/aimagelab/mammoth /work/authors/mammoth
    git -C /work/authors/mammoth checkout e75a491

and give --mammoth-python an interpreter with torch, torchvision, kornia, timm 0.9.8, six, pyyaml, tqdm and
onedrivedownloader (Mammoth's requirements.txt). Offline, two things are needed around it, neither touching a method:
- `datasets/__init__.py` imports every dataset module and some of them download models when imported
  (`seq_8vision.py` through open_clip); wrap that import in try/except (or leave open_clip uninstalled and set
  HF_HUB_OFFLINE=1, which this tool does) so that an import failure skips the module;
- MNIST's four idx files (gunzipped from --mirror) in DIR/data/MNIST/raw, linked as DIR/data/MNIST/MNIST/raw and
  DIR/data/MNIST/MyMNIST/raw (torchvision names the folder after the dataset class); `--prepare-mammoth-data` does it.

For each method and seed, in turns (so that background load hits both alike), on one CPU thread:
- Mammoth: `main.py --dataset seq-mnist --n_epochs 1 --batch_size 10 --num_workers 0 --seed S` plus the method's
  `mammoth` arguments below, launched through tools/speed_seq_mnist.py's `--launch-mammoth` (main.py sets torch to
  two threads itself; the launcher keeps one). Its class-il and task-il accuracies after the last task are read
  from the logs.pyd files it writes under the run's own --results_path.
- clbench: `clbench train seq-mnist -m METHOD --seeds S` plus the method's `clbench` --set values, into a results
  folder of the run's own; the final accuracies are the last stage's task-agnostic (class-IL) and task-aware
  (task-IL) test rows.
Then per tool: class-IL and task-IL final average accuracy, mean (std over seeds, ddof 1) and the median seconds per
run (wall time of the subprocess, start-up included), and whether clbench's class-IL mean is within the issue's
target: max(2 x Mammoth's std, 1 point) of Mammoth's mean.

    OMP_NUM_THREADS=1 python tools/side_by_side_mammoth.py --mammoth /work/authors/mammoth \\
        --mammoth-python /work/authors/venv-mammoth/bin/python --methods er-ace --buffer 500 --seeds 0,1,2

A method's entry in METHODS states both tools' arguments for one buffer size; every value cites where it was read
(Mammoth's utils/best_args.py or models/config/*.yaml where they have seq-mnist values; otherwise one stated set,
the same in both tools). Protocol differences that stay (input normalisation, the heads) are named in
benchmarks/seq-mnist.yaml. `--inputs raw` removes the first: clbench then runs with `--set data.normalize=false`,
the [0, 1] pixels Mammoth's seq-mnist feeds (its transform is ToTensor alone), and its rows are kept apart from the
spec's (ids ending in -raw, the inputs column "[0, 1]").
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from side_by_side_common import (
    REPO,
    Diverged,
    Found,
    current_commit,
    gunzip_mnist,
    in_turns,
    mean_std,
    run_clbench,
    table_row,
    timed,
    unknown_methods,
    verdict,
    write_atomically,
)

LAUNCHER = REPO / "tools" / "speed_seq_mnist.py"
MAMMOTH_COMMON = ["--dataset", "seq-mnist", "--n_epochs", "1", "--batch_size", "10", "--num_workers", "0",
                  "--non_verbose", "1"]


@dataclass(frozen=True)
class Method:
    """One method's arguments in both tools, for a buffer size (the function's argument)."""

    mammoth_model: str                                   # Mammoth's --model (its models/<name>.py)
    mammoth: Callable[[int], list[str]]                  # Mammoth's arguments beyond MAMMOTH_COMMON
    clbench: Callable[[int], list[str]]                  # clbench's --set values beyond the seq-mnist spec
    note: str = ""                                       # where the values come from


def _variant(buffer: int) -> list[str]:
    """The seq-mnist spec's variant for a buffer size (500 is the spec's default)."""
    return [] if buffer == 500 else [f"variant=buffer-{buffer}"]


METHODS: dict[str, Method] = {
    # Mammoth utils/best_args.py 'seq-mnist' er: buffer 200 lr 0.01, 500 lr 0.1, minibatch_size 10; the seq-mnist spec
    # states the same per variant.
    "er": Method("er", lambda b: ["--buffer_size", str(b), "--minibatch_size", "10",
                                  "--lr", {200: "0.01", 500: "0.1", 5120: "0.1"}[b]],
                 _variant, "best_args.py seq-mnist er"),
    # One stated set used by both (best_args.py has no er_ace; models/config/er_ace.yaml only seq-cifar10 buffer 200:
    # lr 0.1, task_free 1): lr 0.1 (er_ace.yaml seq-cifar10; best_args.py seq-mnist er 500), minibatch_size 10
    # (Mammoth's default, the batch size: main.py lines 433-436), and models/er_ace.py get_parser's defaults for
    # the method's own switches (task_free 0, use_custom_classifier 1), stated explicitly; the seq-mnist spec
    # states the same per variant.
    "er-ace": Method("er_ace", lambda b: ["--buffer_size", str(b), "--minibatch_size", "10", "--lr", "0.1",
                                          "--task_free", "0", "--use_custom_classifier", "1"],
                     _variant, "er_ace.py get_parser defaults; lr 0.1 of er_ace.yaml seq-cifar10"),
    # Mammoth utils/best_args.py 'seq-mnist' icarl (lines 436-450): buffer 200, 500 and 5120 all lr 0.1,
    # minibatch_size 10 (unused by models/icarl.py: the exemplars join the task's data), optim_wd 0 (models/icarl.py
    # zeroes it anyway and adds its own --opt_wd, default 1e-5, not in best_args.py); the seq-mnist spec states the
    # same lr per variant.
    "icarl": Method("icarl", lambda b: ["--buffer_size", str(b), "--minibatch_size", "10", "--lr", "0.1",
                                        "--optim_wd", "0"],
                    _variant, "best_args.py seq-mnist icarl"),
    # X-DER: Mammoth has no seq-mnist setting for it (best_args.py, models/config/xder*.yaml: CIFAR only) and its
    # xder cannot run seq-mnist as shipped (no denormalisation transform for its strong_aug): run it from a copy
    # whose models/xder.py skips the SupCon block when lambd is 0 and builds strong_aug only when the data set has
    # a denormalisation (two guards, no term changed). One stated set, used by both tools: lr, minibatch_size, alpha
    # and beta of DER++ (its base) in best_args.py seq-mnist per buffer; lambd 0 (no augmentation on seq-mnist);
    # the rest models/xder.py get_parser defaults (gamma 0.85, constr_eta 0.1, constr_margin 0.3, future_constraint
    # 1, past_constraint 0, align_bn 1), which are clbench's xder defaults. The seq-mnist spec states the same.
    "xder": Method("xder", lambda b: ["--buffer_size", str(b),
                                      "--minibatch_size", {200: "128", 500: "10", 5120: "64"}[b],
                                      "--lr", {200: "0.03", 500: "0.03", 5120: "0.1"}[b],
                                      "--alpha", {200: "0.2", 500: "1.0", 5120: "0.2"}[b],
                                      "--beta", {200: "1.0", 500: "0.5", 5120: "0.5"}[b], "--lambd", "0"],
                   _variant, "best_args.py seq-mnist derpp's lr/minibatch/alpha/beta; xder get_parser defaults"),
    # One stated set used by both: best_args.py has no seq-mnist bic, so lr 0.03 of its seq-cifar100 bic (buffers 500
    # and 2000; optim_mom 0, optim_wd 0) at every buffer; models/bic.py get_parser's defaults for the rest (bic_epochs
    # 250, temp 2, valset_split 0.1), and its bias fit (end_task: Adam at lr 0.001, no L2 on beta), which the
    # seq-mnist spec's bic section states.
    "bic": Method("bic", lambda b: ["--buffer_size", str(b), "--lr", "0.03"], _variant,
                  "best_args.py seq-cifar100 bic lr; models/bic.py defaults"),
    # lucir: no best_args.py seq-mnist entry, models/config/lucir.yaml has seq-cifar100 only: one stated set used by
    # both. models/lucir.py get_parser defaults: lamda_base 5, lamda_mr 1, k_mr 2, mr_margin 0.5, fitting_epochs 20,
    # lr_finetune 0.01, imprint_weights 1 (utils/args.py: optim_wd 0, optim_mom 0); lr 0.1, icarl's best_args.py
    # seq-mnist lr at buffers 200 and 500. The seq-mnist spec's lucir entry states the same values. On a machine
    # without CUDA, run a copy of Mammoth whose models/lucir.py `fit_buffer` guards its unconditional
    # `torch.cuda.synchronize()` with `if torch.cuda.is_available():` (it raises there otherwise).
    "lucir": Method("lucir", lambda b: ["--buffer_size", str(b), "--lr", "0.1", "--lamda_base", "5", "--lamda_mr", "1",
                                        "--k_mr", "2", "--mr_margin", "0.5", "--fitting_epochs", "20",
                                        "--lr_finetune", "0.01", "--imprint_weights", "1"],
                    _variant, "models/lucir.py get_parser defaults; lr 0.1 (icarl's seq-mnist best_args)"),
    # GDumb: no seq-mnist entry in best_args.py, models/config/gdumb.yaml has seq-cifar10 only (lr 0), so one stated
    # set, the same in both tools: models/gdumb.py get_parser's defaults (maxlr 0.05, minlr 0.0005, fitting_epochs
    # 256, cutmix_alpha 1.0; lr 0, n_epochs 1) and utils/args.py's optim_mom 0, optim_wd 0; the fit's batch is
    # --batch_size 10. The seq-mnist spec states the same values (its gdumb entry), so clbench needs no --set.
    "gdumb": Method("gdumb", lambda b: ["--buffer_size", str(b), "--minibatch_size", "10"], _variant,
                    "models/gdumb.py get_parser defaults"),
}


def clbench_inputs(inputs: str) -> list[str]:
    """clbench's --set values for `--inputs`: none for the spec's, `data.normalize=false` for Mammoth's raw pixels."""
    return ["data.normalize=false"] if inputs == "raw" else []


# ------------------------------------------------------------------------------------------------------- Mammoth
def prepare_mammoth_data(mammoth: Path, mirror: Path) -> None:
    """MNIST's idx files gunzipped into DIR/data/MNIST/raw and linked where torchvision's MNIST classes look."""
    raw = mammoth / "data" / "MNIST" / "raw"
    gunzip_mnist(mirror, raw)
    for owner in ("MNIST", "MyMNIST"):
        folder = raw.parent / owner
        folder.mkdir(exist_ok=True)
        if not (folder / "raw").exists():
            (folder / "raw").symlink_to(Path("..") / "raw")


def mammoth_final(results: Path, setting: str) -> float:
    """The mean accuracy after the last task (accmean_task5) of the last run logged under `results`."""
    [log] = list(results.glob(f"{setting}/seq-mnist/*/logs.pyd"))
    line = log.read_text().strip().splitlines()[-1]
    found = re.search(r"'accmean_task5': (?:np\.float64\()?([0-9.eE+-]+)", line)
    if found is None:
        raise SystemExit(f"no accmean_task5 in {log}: did the Mammoth run finish?")
    return float(found.group(1))


MAMMOTH_NAN = "assert not math.isnan(loss)"  # e75a491 utils/training.py line 110: a NaN loss ends the run


def run_mammoth(args: argparse.Namespace, method: Method, seed: int) -> tuple[float, float, float]:
    """(class-IL %, task-IL %, wall seconds) of one Mammoth run."""
    results = args.log_dir / "mammoth" / f"{method.mammoth_model}-b{args.buffer}-s{seed}"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    command = [args.mammoth_python, str(LAUNCHER), "--launch-mammoth", str(args.mammoth), "--threads", "1", "--",
               *MAMMOTH_COMMON, "--model", method.mammoth_model, *method.mammoth(args.buffer), "--seed", str(seed),
               "--results_path", f"{results}/"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    try:
        seconds = timed(command, env, args.mammoth, results / "log.txt")
    except SystemExit:
        if MAMMOTH_NAN in (results / "log.txt").read_text(errors="replace"):
            raise Diverged(f"a NaN loss stopped Mammoth (its `{MAMMOTH_NAN}`, utils/training.py); see "
                           f"{results / 'log.txt'}") from None
        raise
    return mammoth_final(results, "class-il"), mammoth_final(results, "task-il"), seconds


# ------------------------------------------------------------------------------------------------- results file
RESULTS_HEADER = """\
# Class-incremental methods side by side with Mammoth (aimagelab/mammoth@e75a491) on seq-MNIST, one CPU thread:
# final average accuracy after the last task, class-IL (clbench's task-agnostic evaluation) and task-IL
# (task-aware), %, mean (sample std) over the seeds, each seed's class-IL, and the median seconds per run (wall time
# of the process, start-up included; the machine's load at the time moves it). Written by
# tools/side_by_side_mammoth.py --results-file (one row per method, buffer and tool, replaced when re-run); shown by
# docs/class-incremental.md; the ledger's seq-mnist Mammoth rows read from here.
"""


RAW_INPUTS = "[0, 1]"          # Mammoth's seq-mnist inputs, and clbench's with data.normalize false
SPEC_INPUTS = "normalised"     # the seq-mnist spec's: (pixel / 255 - 0.1307) / 0.3081


def inputs_of(tool: str, raw: bool) -> str:
    """What a tool's row was fed: Mammoth always [0, 1] pixels; clbench the spec's unless `--inputs raw`."""
    return RAW_INPUTS if tool == "Mammoth" or raw else SPEC_INPUTS


def row_record(name: str, buffer: int, tool: str, found: list[Found], seeds: str,
               commit: str, raw: bool = False) -> dict[str, str]:
    """One results-file row: a tool's numbers for a method at a buffer size (clbench's with [0, 1] inputs: `raw`)."""
    class_il, task_il, seconds = zip(*found, strict=True)
    (c_mean, c_std), (t_mean, t_std) = mean_std(class_il), mean_std(task_il)
    suffix = "-raw" if raw and tool != "Mammoth" else ""
    return {"id": f"{name}-{buffer}-{tool.lower()}{suffix}", "method": name, "buffer": str(buffer), "tool": tool,
            "inputs": inputs_of(tool, raw),
            "class_il": f"{c_mean:.1f} ({c_std:.1f})", "task_il": f"{t_mean:.1f} ({t_std:.1f})",
            "per_seed": ", ".join(f"{value:.2f}" for value in class_il), "seeds": seeds,
            "seconds": f"{statistics.median(seconds):.1f}", "commit": commit}


def pair_record(mammoth: dict[str, str], ours: dict[str, str], raw: dict[str, str] | None = None) -> dict[str, str]:
    """One method at one buffer, both tools side by side, with the target's verdict from the per-seed class-IL;
    `raw`: clbench's row with Mammoth's [0, 1] inputs, if measured (its class-IL and verdict beside)."""
    def seeds(row: dict[str, str]) -> list[float]:
        return [float(value) for value in row["per_seed"].split(", ")]

    def word(row: dict[str, str]) -> str:
        return verdict(seeds(row), seeds(mammoth)).split(" (")[0]

    return {"id": f"{ours['method']}-{ours['buffer']}", "method": ours["method"], "buffer": ours["buffer"],
            "tool": "both", "mammoth_class_il": mammoth["class_il"], "clbench_class_il": ours["class_il"],
            "clbench_raw_class_il": raw["class_il"] if raw else "-",
            "mammoth_task_il": mammoth["task_il"], "clbench_task_il": ours["task_il"],
            "mammoth_seconds": mammoth["seconds"], "clbench_seconds": ours["seconds"], "within": word(ours),
            "within_raw": word(raw) if raw else "-"}


def write_results(path: Path, records: list[dict[str, str]], command: str | None) -> None:
    """Insert or replace `records` (by id) in the results file at `path`; one table per method, one of all, and
    `pairs` (each method and buffer with both tools in one row, re-derived from the tools' rows at every write)."""
    import yaml

    data = yaml.safe_load(path.read_text()) if path.exists() else {}
    rows = {row["id"]: {**row, "inputs": row.get("inputs") or inputs_of(row["tool"], False)}
            for row in data.get("rows", []) if row["tool"] != "both"}
    rows.update({record["id"]: record for record in records})
    ordered = sorted(rows.values(), key=lambda row: (row["method"], -int(row["buffer"]), row["tool"] != "Mammoth",
                                                     row["inputs"] == RAW_INPUTS))
    def pair_of(row: dict[str, str]) -> str:
        return f"{row['method']}-{row['buffer']}"

    pairs = [pair_record(rows[f"{pair_of(row)}-mammoth"], row, rows.get(f"{pair_of(row)}-clbench-raw"))
             for row in ordered if row["id"] == f"{pair_of(row)}-clbench" and f"{pair_of(row)}-mammoth" in rows]
    commands = list(dict.fromkeys([*data.get("measured", {}).get("commands", []), *([command] if command else [])]))
    columns = {"method": "`{method}`", "buffer": "{buffer}", "tool": "{tool}", "inputs": "{inputs}",
               "class-IL %": "{class_il}",
               "task-IL %": "{task_il}", "class-IL per seed": "{per_seed}", "seconds per run": "{seconds}",
               "at": "{commit}"}
    tables: dict[str, dict] = {"all": {"columns": columns, "rows": [row["id"] for row in ordered]}}
    for method in dict.fromkeys(row["method"] for row in ordered):
        tables[method] = {"columns": {key: value for key, value in columns.items() if key != "method"},
                          "rows": [row["id"] for row in ordered if row["method"] == method]}
    tables["pairs"] = {"columns": {
        "method": "`{method}`", "buffer": "{buffer}", "class-IL % Mammoth": "{mammoth_class_il}",
        "class-IL % clbench": "{clbench_class_il}", "target": "{within}",
        "class-IL % clbench, [0, 1] inputs": "{clbench_raw_class_il}", "target, [0, 1] inputs": "{within_raw}",
        "task-IL % Mammoth": "{mammoth_task_il}",
        "task-IL % clbench": "{clbench_task_il}", "s/run Mammoth": "{mammoth_seconds}",
        "s/run clbench": "{clbench_seconds}"},
        "rows": [pair["id"] for pair in pairs]}
    body = {"measured": {"commit": "per row (`at`)", "commands": commands}, "rows": ordered + pairs, "tables": tables}
    text = RESULTS_HEADER + yaml.safe_dump(body, sort_keys=False, width=120, allow_unicode=True)
    write_atomically(path, text)


def retime(path: Path, records: list[dict[str, str]]) -> None:
    """Replace the seconds of the rows of `path` that `records` re-timed (same id), noting the seeds and commit."""
    import yaml

    rows = {row["id"]: row for row in yaml.safe_load(path.read_text())["rows"]}
    missing = sorted(record["id"] for record in records if record["id"] not in rows)
    if missing:
        raise SystemExit(f"--seconds-only: no rows {', '.join(missing)} in {path}; run the full comparison first")
    write_results(path, [rows[record["id"]] | {"seconds": f"{record['seconds']} (seed {record['seeds']} at "
                                                          f"{record['commit']}, idle)"} for record in records], None)


SEED_LINE = re.compile(r"^(\S+) (Mammoth|clbench) seed (\d+): class-IL ([0-9.]+), task-IL ([0-9.]+), ([0-9.]+) s$")


def found_in_output(text: str) -> dict[tuple[str, str], list[tuple[int, tuple[float, float, float]]]]:
    """The per-seed lines this tool prints, read back: (method, tool) -> [(seed, (class-IL, task-IL, seconds))]."""
    found: dict[tuple[str, str], list[tuple[int, tuple[float, float, float]]]] = {}
    for line in text.splitlines():
        match = SEED_LINE.match(line.strip())
        if match:
            name, tool, seed, class_il, task_il, seconds = match.groups()
            found.setdefault((name, tool), []).append((int(seed), (float(class_il), float(task_il), float(seconds))))
    return found


DIVERGED_LINE = re.compile(r"^(\S+) (Mammoth|clbench) seed (\d+): diverged \(")


def diverged_in_output(text: str) -> dict[str, set[int]]:
    """The seeds this tool printed as diverged, read back: method -> seeds."""
    diverged: dict[str, set[int]] = {}
    for line in text.splitlines():
        match = DIVERGED_LINE.match(line.strip())
        if match:
            diverged.setdefault(match.group(1), set()).add(int(match.group(3)))
    return diverged


def results_command(args: argparse.Namespace, seeds: str) -> str:
    """The command a results file names for its rows: this tool at `args`' buffer and inputs over `seeds`."""
    return (f"OMP_NUM_THREADS=1 python tools/side_by_side_mammoth.py --mammoth PATH/mammoth --mammoth-python PYTHON "
            f"--methods METHOD --buffer {args.buffer} --seeds {seeds} --mirror ../shared/data "
            f"--results-file {args.results_file}{' --inputs raw' if args.inputs == 'raw' else ''}")


def rederive(args: argparse.Namespace) -> None:
    """Write the results file's rows from a saved output of this tool, for the buffer size given."""
    text = args.from_output.read_text()
    records, diverged = [], diverged_in_output(text)
    for (name, tool), seeds in found_in_output(text).items():
        # a seed on which a tool diverged is left out of every tool's numbers, as when the comparison ran
        kept = sorted((seed, values) for seed, values in seeds if seed not in diverged.get(name, set()))
        records.append(row_record(name, args.buffer, tool, [values for _, values in kept],
                                  ",".join(str(seed) for seed, _ in kept), args.at, args.inputs == "raw"))
    if not records:
        raise SystemExit(f"no per-seed lines ('METHOD TOOL seed S: class-IL ...') in {args.from_output}")
    write_results(args.results_file, records, results_command(args, "0,1,2"))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mammoth", type=Path, required=True, help="aimagelab/mammoth at e75a491")
    parser.add_argument("--mammoth-python", required=True, help="interpreter with Mammoth's requirements")
    parser.add_argument("--mirror", type=Path, default=REPO.parent / "shared" / "data", help="folder with mnist/*.gz")
    parser.add_argument("--methods", default="er", help=f"comma-separated, of {', '.join(METHODS)}")
    parser.add_argument("--buffer", type=int, default=500, choices=[200, 500, 5120])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--log-dir", type=Path, default=Path("side-by-side-mammoth"))
    parser.add_argument("--only", choices=["mammoth", "clbench"], default=None)
    parser.add_argument("--inputs", choices=["spec", "raw"], default="spec",
                        help="clbench's inputs: the seq-mnist spec's normalised ones, or raw: [0, 1] pixels as "
                             "Mammoth's (--set data.normalize=false; rows apart, ids ending in -raw)")
    parser.add_argument("--prepare-mammoth-data", action="store_true", help="gunzip and link MNIST for Mammoth")
    parser.add_argument("--results-file", type=Path, default=None,
                        help="write the rows into this docs results file (docs/results/seq-mnist-mammoth.yaml)")
    parser.add_argument("--from-output", type=Path, default=None,
                        help="run nothing: read the per-seed lines of an earlier run's saved output (with --at)")
    parser.add_argument("--at", default=None, help="with --from-output: the commit that run measured")
    parser.add_argument("--seconds-only", action="store_true",
                        help="with --results-file: replace only the seconds of the rows already there (a timing pass "
                             "on an idle machine); their accuracies stay those of their full runs")
    args = parser.parse_args(argv)
    if args.seconds_only and args.results_file is None:
        parser.error("--seconds-only needs --results-file")
    if args.from_output is not None:
        if args.results_file is None or args.at is None:
            parser.error("--from-output needs --results-file and --at COMMIT (the commit the output was measured at)")
        rederive(args)
        return
    args.mammoth, args.log_dir = args.mammoth.resolve(), args.log_dir.resolve()
    problem = unknown_methods(args.methods, list(METHODS))
    if problem:
        parser.error(problem)
    if args.prepare_mammoth_data:
        prepare_mammoth_data(args.mammoth, args.mirror)
    lines = ["| method | tool | class-IL % | task-IL % | seconds per run |", "|---|---|---|---|---|"]
    verdicts, records, commit = [], [], current_commit()
    for name in args.methods.split(","):
        method = METHODS[name]
        turns = in_turns(name, [int(s) for s in args.seeds.split(",")], {
            "Mammoth": lambda seed, method=method: run_mammoth(args, method, seed),
            "clbench": lambda seed, name=name, method=method: run_clbench(
                args.log_dir / "clbench" / f"{name}-b{args.buffer}-s{seed}", "seq-mnist", name, seed,
                [*method.clbench(args.buffer), *clbench_inputs(args.inputs)], args.mirror)}, args.only)
        found, kept = turns.found, ",".join(str(seed) for seed in turns.kept)
        lines += [table_row(tool, name, values) for tool, values in found.items() if values]
        records += [row_record(name, args.buffer, tool, values, kept, commit, args.inputs == "raw")
                    for tool, values in found.items() if values]
        if all(found.values()):
            verdicts.append(f"{name}, buffer {args.buffer}: clbench's class-IL mean "
                            f"{verdict([v[0] for v in found['clbench']], [v[0] for v in found['Mammoth']])}")
        verdicts += [f"{name}, buffer {args.buffer}: seed {seed} left out of both tools' numbers ({why})"
                     for seed, why in turns.left_out.items()]
    print("\n".join(lines + [""] + verdicts))
    if args.results_file is not None:
        command = results_command(args, args.seeds)
        if args.seconds_only:
            retime(args.results_file, records)
        else:
            write_results(args.results_file, records, command)


if __name__ == "__main__":
    main()
