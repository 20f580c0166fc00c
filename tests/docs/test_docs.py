"""The documentation cannot drift from the code: the generated reference pages are what the code makes, every
`clbench ...` command in the README and the site is accepted by the CLI, and the README stays a front page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from documented_commands import REPO, Documented, documented_commands, problems
from toolloader import load_tool


def test_the_generated_reference_pages_are_what_the_code_makes() -> None:
    tool = load_tool("docs_reference")
    for page, make in tool.PAGES.items():
        written = (REPO / "docs" / page).read_text()
        assert written == make(), f"docs/{page} is stale: run `python tools/docs_reference.py`"


def test_the_generated_results_sections_are_what_their_files_make() -> None:
    tool = load_tool("docs_reference")
    pages = tool.hand_written_pages()
    # concepts, approaches, plugins, replay and successors show results files: finding fewer means a marker broke
    assert len(pages) >= 5
    for path in pages:
        written = path.read_text()
        assert written == tool.with_results(written), f"{path.name}: a generated section is stale (edited by hand?): " \
            "edit docs/results/, then run `python tools/docs_reference.py`"


def test_every_documented_command_is_accepted_by_the_cli() -> None:
    commands = documented_commands()
    # the README's first command and the site's pages hold many: finding few means the extraction broke
    assert len(commands) > 100
    assert sum(not command.template for command in commands) > 60
    wrong = {f"{command.where}: `{command.text}`": found for command in commands if (found := problems(command))}
    assert not wrong, "\n".join(f"{where}: {found}" for where, found in wrong.items())


@pytest.mark.parametrize(("text", "expected"), [
    ("clbench train pmnist -m sgd --seeds 0 --sett training.lr=0.1", "unknown option --sett"),
    ("clbench train pmnist -m sgd --seeds 0 --set training.lrr=0.1", "--set does not resolve"),
    ("clbench train pmnist -m sgdd --seeds 0", "unknown method 'sgdd'"),
    ("clbench train pmnistt -m sgd --seeds 0", "unknown benchmark 'pmnistt'"),
    ("clbench trian pmnist", "unknown command 'trian'"),
    ("clbench report pmnist --tabel", "unknown option --tabel"),
    ("clbench fetch pmnistt", "neither a shipped benchmark nor a data set"),
])
def test_a_misspelled_command_is_caught(text: str, expected: str) -> None:
    found = problems(Documented(text, "test"))
    assert any(expected in problem for problem in found), found


def test_a_correct_command_passes() -> None:
    assert problems(Documented("clbench train pmnist -m sgd,hat --seeds 0-2 --set data.n_tasks=5 "
                               "--set hat.c=2 --with-references", "test")) == []
    assert problems(Documented("clbench train pmnist -m sgd --seeds 0 --set data.n_tasks=N", "test")) == []


def test_commands_are_found_in_code_blocks_and_inline(tmp_path: Path) -> None:
    from documented_commands import commands_in

    page = tmp_path / "page.md"
    page.write_text("Run `clbench list` first.\n\n```bash\nCLBENCH_X=1 .venv/bin/clbench fetch mnist2 && "
                    "clbench train mnist2 \\\n  -m sgd --seeds 0  # a comment\n"
                    "time env OMP_NUM_THREADS=2 clbench report mnist2 --table  # 0.6 s\n```\n")
    assert [command.text for command in commands_in(page)] == [
        "clbench fetch mnist2", "clbench train mnist2 -m sgd --seeds 0", "clbench report mnist2 --table",
        "clbench list"]


def test_the_readme_is_a_front_page() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def test_the_reproductions_ledger_refuses_an_unknown_verdict_and_a_repeated_row(tmp_path: Path) -> None:
    tool = load_tool("docs_reference")
    row = ("  - {id: %s, setting: s, clbench: '1', tolerance: t, within: '%s', commands: ['clbench list'], "
           "page: index.md}\n")
    ledger = tmp_path / "ledger.yaml"
    ledger.write_text("entries:\n" + row % ("a", "yes") + row % ("b", "close enough") + "not_compared: []\n")
    with pytest.raises(ValueError, match="'b': within must be one of"):
        tool.reproductions_page(ledger)
    ledger.write_text("entries:\n" + row % ("a", "yes") + row % ("a", "no") + "not_compared: []\n")
    with pytest.raises(ValueError, match="'a' is there twice"):
        tool.reproductions_page(ledger)
    ledger.write_text("entries:\n" + row % ("a", "yes") + row % ("b", "no") + "not_compared: []\n")
    page = tool.reproductions_page(ledger)
    assert "2 comparisons; within tolerance: yes 1, no 1." in page and '<a id="b"></a>' in page


def test_a_ledger_note_pointing_at_the_next_row_needs_that_row_below_it(tmp_path: Path) -> None:
    tool = load_tool("docs_reference")
    row = ("  - {id: %s, setting: s, clbench: '1', tolerance: t, within: 'no', note: '%s', "
           "commands: ['clbench list'], page: index.md}\n")
    ledger = tmp_path / "ledger.yaml"
    matched = row % ("hat-mnist2-paper", "the network (next row)") + row % ("hat-mnist2-reference", "one seed")
    ledger.write_text("entries:\n" + matched + "not_compared: []\n")
    assert '<a id="hat-mnist2-reference"></a>' in tool.reproductions_page(ledger)
    inserted = (row % ("hat-mnist2-paper", "the network (next row)") + row % ("tab5mnist-sgd", "protocol")
                + row % ("hat-mnist2-reference", "one seed"))
    ledger.write_text("entries:\n" + inserted + "not_compared: []\n")
    with pytest.raises(ValueError, match="'hat-mnist2-paper': its note points at the next row, but the row below "
                                         "it is 'tab5mnist-sgd'"):
        tool.reproductions_page(ledger)
    ledger.write_text("entries:\n" + row % ("hat-mnist2-paper", "see the next rows") + "not_compared: []\n")
    with pytest.raises(ValueError, match="the row below it is None"):
        tool.reproductions_page(ledger)


def test_every_built_in_approach_names_the_authors_code() -> None:
    # the approaches reference renders each class docstring: it names the authors' source files (or, for the HAT
    # paper's baselines and references, the HAT authors' code for them), each in backquotes
    from clbench.approaches import BUILTINS
    from clbench.approaches.registry import REGISTRY

    missing = [name for name in BUILTINS if not re.search(r"authors' code[^`]*`[\w./-]+\.(py|ipynb)`",
                                                            REGISTRY[name].__doc__ or "")]
    assert not missing, f"class docstrings without the authors' code: {missing}"


# A measured time or size: a number and its unit. A command: a backquoted `clbench`, `python`, `time`, `du`,
# `apt-get` or `OMP_NUM_THREADS=...` line or a `tools/*.py` script, or a fenced code block.
FIGURE = re.compile(r"\b\d[\d,]*(?:\.\d+)? ?(?:ms|s|µs|us|MiB|MB|GiB|GB|kB|KiB)\b")
COMMAND = re.compile(r"`(?:clbench |python |time |OMP_NUM_THREADS=|apt-get |du |\.venv/bin/|tools/\w+\.py)[^`]*`|^```",
                     re.M)


def paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks; a table, or a one-line caption ending in ':', joins the block before it, so a
    results table and its captions count as one paragraph with the text that introduces them."""
    found: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        caption = "\n" not in block and block.rstrip().endswith(":")
        joins = block.lstrip().startswith(("|", "<!-- generated: ", "<!-- end generated -->")) or caption
        if found and joins and not found[-1].startswith("```"):
            found[-1] += "\n\n" + block
        else:
            found.append(block)
    return found


def figures_without_a_command(text: str) -> list[str]:
    """Paragraphs with a time or size in them and no command within two paragraphs either side."""
    blocks = paragraphs(text)
    return [block for index, block in enumerate(blocks) if not block.startswith("```") and FIGURE.search(block)
            and not COMMAND.search("\n\n".join(blocks[max(0, index - 2):index + 3]))]


def test_a_figure_with_no_command_near_it_is_found() -> None:
    alone = "Intro.\n\nThe extras add about 133 MB.\n\nMore.\n\nEven more.\n"
    assert figures_without_a_command(alone) == ["The extras add about 133 MB."]
    for near in ("`python tools/extras_size.py tensorboard,wandb` measures it.", "```bash\ndu -sh .venv\n```"):
        assert figures_without_a_command(alone.replace("More.", near)) == []
    far = "```bash\nclbench list\n```\n\nA.\n\nB.\n\nIt took 3.2 s."
    assert figures_without_a_command(far) == ["It took 3.2 s."]
    table = ("```bash\nclbench report mnist5\n```\n\nA.\n\nB.\n\npmnist, summary:\n\n"
             "| a | memory |\n|---|---|\n| x | 2 kB |\n")
    assert figures_without_a_command(table) == []  # the table and its caption join B., within two of the command


def test_every_measured_time_or_size_in_the_docs_has_its_command_near_it() -> None:
    missing = {f"{path.relative_to(REPO)}: {block[:120]!r}" for path in [REPO / "README.md",
                                                                        *sorted((REPO / "docs").glob("*.md"))]
               for block in figures_without_a_command(path.read_text())}
    assert not missing, "a measured time or size without the command that made it:\n" + "\n".join(sorted(missing))
