"""tools/side_by_side_gdumb.py: reading the authors' log, patching their copy, and the docs results file."""

from __future__ import annotations

import gzip

import pytest
import yaml
from toolloader import load_tool

# Three passes of the authors' main.py as its checkpoint.log writes them (src/main.py `experiment`, `test`, `train`;
# src/utils.py get_logger's format), the values made up.
LOG = """\
[2026-11-26 10:37:10,001] INFO:utils:==> Opts for this training: Namespace(dataset='MNIST', memory_size=500)
[2026-11-26 10:37:10,002] INFO:utils:==> Starting pass number: 0, Learning rate: 0.005000000000000001
[2026-11-26 10:37:10,120] INFO:utils:==> Train:[0]\tTime:0.1180\tData:0.0700\tLoss:2.1032\t
[2026-11-26 10:37:11,450] INFO:utils:==> Test: [0]\tTime:1.3282\tLoss:1.4937\tAcc:0.6012\tTask Acc:0.9100\t
[2026-11-26 10:37:11,450] INFO:utils:==> Current accuracy: [0.601]\t
[2026-11-26 10:37:11,450] INFO:utils:==> Accuracies\tPrevious: [0.000]\tCurrent: [0.601]\t
[2026-11-26 10:37:11,451] INFO:utils:==> Starting pass number: 1, Learning rate: 0.05
[2026-11-26 10:37:11,570] INFO:utils:==> Train:[1]\tTime:0.1190\tData:0.0710\tLoss:0.9000\t
[2026-11-26 10:37:12,900] INFO:utils:==> Test: [1]\tTime:1.3000\tLoss:0.5000\tAcc:0.8533\tTask Acc:0.9810\t
[2026-11-26 10:37:12,900] INFO:utils:==> Current accuracy: [0.853]\t
[2026-11-26 10:37:12,900] INFO:utils:==> Accuracies\tPrevious: [0.601]\tCurrent: [0.853]\t
[2026-11-26 10:37:12,901] INFO:utils:==> Starting pass number: 2, Learning rate: 0.0275
[2026-11-26 10:37:13,020] INFO:utils:==> Train:[2]\tTime:0.1170\tData:0.0690\tLoss:0.7000\t
[2026-11-26 10:37:14,350] INFO:utils:==> Test: [2]\tTime:1.3100\tLoss:0.5500\tAcc:0.8400\tTask Acc:0.9855\t
[2026-11-26 10:37:14,350] INFO:utils:==> Current accuracy: [0.840]\t
[2026-11-26 10:37:14,351] INFO:utils:==> Training completed! Acc: [0.853]
"""


def test_the_log_gives_every_pass_the_last_and_the_best() -> None:
    tool = load_tool("side_by_side_gdumb")
    run = tool.parse_authors_log(LOG)
    assert run.class_il == pytest.approx([60.12, 85.33, 84.00])
    assert run.task_il == pytest.approx([91.00, 98.10, 98.55])
    assert run.last == pytest.approx((84.00, 98.55))  # the last pass, not the best one
    assert run.best == pytest.approx(85.33)           # pass 1
    assert run.reported == pytest.approx(85.3)        # "Training completed! Acc: [0.853]"


def test_an_unfinished_or_short_log_is_refused() -> None:
    tool = load_tool("side_by_side_gdumb")
    with pytest.raises(ValueError, match="not a finished run"):
        tool.parse_authors_log(LOG.rsplit("\n", 2)[0])  # no "Training completed" line
    with pytest.raises(ValueError, match="3 of them"):
        tool.parse_authors_log(LOG, passes=128)
    skipped = "\n".join(line for line in LOG.splitlines() if "Test: [1]" not in line)
    with pytest.raises(ValueError, match="test passes"):
        tool.parse_authors_log(skipped)
    with pytest.raises(ValueError, match="not the best pass"):  # a final line that is not the best pass
        tool.parse_authors_log(LOG.replace("completed! Acc: [0.853]", "completed! Acc: [0.900]"))


MAIN = """    model = model.half().cuda() # Better speed
    criterion = nn.CrossEntropyLoss().cuda()
                inputs, labels = inputs.half().cuda(non_blocking=True), labels.cuda(non_blocking=True)
            inputs, labels = inputs.half().cuda(non_blocking=True), (labels).cuda(non_blocking=True)
"""
DATALOADER = ("        self.class_mask = torch.from_numpy(np.kron(np.eye(self.opt.num_tasks,dtype=int),"
              "np.ones((self.opt.num_classes_per_task,self.opt.num_classes_per_task)))).cuda() #Generates\n")


def fake_copy(tmp_path):
    root = tmp_path / "gdumb"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text(MAIN)
    (root / "src" / "dataloader.py").write_text(DATALOADER)
    mirror = tmp_path / "mirror" / "mnist"
    mirror.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        with gzip.open(mirror / f"{name}.gz", "wb") as out:
            out.write(name.encode())
    return root, mirror.parent


def test_prepare_puts_the_data_in_place_patches_once_and_is_idempotent(tmp_path) -> None:
    tool = load_tool("side_by_side_gdumb")
    root, mirror = fake_copy(tmp_path)
    tool.prepare_gdumb(root, mirror)
    main = (root / "src" / "main.py").read_text()
    assert main == """    model = model.half() # Better speed
    criterion = nn.CrossEntropyLoss().cuda()
                inputs, labels = inputs.half(), labels
            inputs, labels = inputs.half(), (labels)
"""  # the loss's .cuda() left alone (a module without tensors)
    assert (root / "src" / "dataloader.py").read_text().endswith("num_classes_per_task)))) #Generates\n")
    assert (root / "data" / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").read_bytes() == b"t10k-labels-idx1-ubyte"
    tool.prepare_gdumb(root, mirror)  # again: nothing changes
    assert (root / "src" / "main.py").read_text() == main
    assert not any(tool.apply_patch(root, patch) for patch in tool.PATCHES)  # every patch is there already


def test_a_file_that_is_not_the_authors_is_refused(tmp_path) -> None:
    tool = load_tool("side_by_side_gdumb")
    root, mirror = fake_copy(tmp_path)
    (root / "src" / "main.py").write_text(MAIN.replace("model.half().cuda()", "model.cuda()"))
    with pytest.raises(SystemExit, match="found 0 times"):
        tool.prepare_gdumb(root, mirror)
    (root / "src" / "main.py").write_text(MAIN + MAIN)  # the text twice: which one?
    with pytest.raises(SystemExit, match="found 2 times"):
        tool.apply_patch(root, tool.PATCHES[0])


def test_the_results_file_holds_both_tools_and_the_best_pass_and_replaces_rows(tmp_path) -> None:
    tool = load_tool("side_by_side_gdumb")
    path = tmp_path / "mnist-gdumb-authors.yaml"
    runs = [tool.AuthorsRun([80.0, 86.0, 85.0], [97.0, 98.0, 98.5], 86.0),
            tool.AuthorsRun([81.0, 84.0, 83.0], [96.0, 97.0, 97.5], 84.0)]
    found = {"authors": [(85.0, 98.5, 200.0), (83.0, 97.5, 210.0)], "clbench": [(84.0, 96.0, 30.0),
                                                                               (82.0, 95.0, 40.0)]}
    tool.write_results(path, tool.records_of(500, found, runs, "0,1", "abc1234"), "command one")
    again = {"authors": [], "clbench": [(90.0, 99.0, 10.0)]}
    tool.write_results(path, tool.records_of(300, again, [], "0", "def5678"), "command two")
    data = yaml.safe_load(path.read_text())
    rows = {row["id"]: row for row in data["rows"]}
    assert list(rows) == ["m500-authors", "m500-authors-best", "m500-clbench", "m300-clbench"]
    assert rows["m500-authors"]["class_il"] == "84.0 (1.4)"          # 85, 83: sample std sqrt(2)
    assert rows["m500-authors"]["per_seed"] == "85.00, 83.00"
    assert rows["m500-authors"]["seconds"] == "205.0"                # the median of 200 and 210
    assert rows["m500-authors-best"]["class_il"] == "85.0 (1.4)"     # 86 and 84, their best passes
    assert rows["m500-authors-best"]["task_il"] == "97.5 (0.7)"      # the task-IL of those passes: 98, 97
    assert rows["m500-clbench"]["task_il"] == "95.5 (0.7)" and rows["m500-clbench"]["commit"] == "abc1234"
    assert rows["m300-clbench"]["class_il"] == "90.0 (0.0)" and rows["m300-clbench"]["seeds"] == "0"
    assert data["measured"]["commands"] == ["command one", "command two"]
    assert data["tables"]["all"]["rows"] == list(rows)
    tool.write_results(path, tool.records_of(500, {"authors": [], "clbench": [(70.0, 90.0, 5.0)]}, [], "0", "x"),
                       "command one")
    data = yaml.safe_load(path.read_text())
    assert [row["class_il"] for row in data["rows"] if row["id"] == "m500-clbench"] == ["70.0 (0.0)"]  # replaced
    assert data["measured"]["commands"] == ["command one", "command two"]  # not twice
    rendered = load_tool("docs_reference").results_table("mnist-gdumb-authors", "all", folder=tmp_path)
    assert rendered[0].startswith("| memory | run | class-IL % |") and len(rendered) == 2 + 4


def test_an_ablation_names_its_arguments_in_its_rows() -> None:
    tool = load_tool("side_by_side_gdumb")
    found = {"authors": [(70.0, 90.0, 100.0)], "clbench": [(85.0, 95.0, 20.0)]}
    runs = [tool.AuthorsRun([71.0, 70.0], [91.0, 90.0], 71.0)]
    records = tool.records_of(500, found, runs, "0", "c", ["--bn"], ["gdumb.maxlr=0.01"])
    assert [record["id"] for record in records] == ["m500-authors-bn", "m500-authors-bn-best",
                                                    "m500-clbench-maxlr0.01"]
    assert records[0]["run"] == "authors' main.py --bn, last pass"
    assert records[1]["class_il"] == "71.0 (0.0)" and records[1]["task_il"] == "91.0 (0.0)"
    assert records[2]["run"] == "clbench `gdumb` `gdumb.maxlr=0.01`"
