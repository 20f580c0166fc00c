"""Measured results tables are written once: a page's table and the reproductions ledger's clbench value are both
read from `docs/results/NAME.yaml` by `tools/docs_reference.py`, and no ledger value is typed again in a page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from documented_commands import REPO
from toolloader import load_tool

RESULTS = """\
measured: {commit: abc1234, commands: ["clbench train mnist2 -m sgd,hat --seeds 0-1"]}
rows:
  - {id: sgd, approach: sgd, accuracy: "95.0 (0.4)", bwt: "-1.0 (0.1)"}
  - {id: hat, approach: hat, accuracy: "94.4 (0.2)"}
tables:
  main:
    columns: {approach: "{approach}", "A<=2 [%]": "{accuracy}, BWT {bwt}"}
    rows: [hat, sgd]
"""

PAGE = """\
Intro, hat at <!-- generated: results/toy:hat:accuracy -->old<!-- end generated -->.

<!-- generated: results/toy -->
| stale |
<!-- end generated -->

- in a list:

  <!-- generated: results/toy#main -->
  <!-- end generated -->
"""

EXPECTED = """\
Intro, hat at <!-- generated: results/toy:hat:accuracy -->94.4 (0.2)<!-- end generated -->.

<!-- generated: results/toy -->
| approach | A<=2 [%] |
|---|---|
| hat | 94.4 (0.2), BWT - |
| sgd | 95.0 (0.4), BWT -1.0 (0.1) |

<!-- end generated -->

- in a list:

  <!-- generated: results/toy#main -->
  | approach | A<=2 [%] |
  |---|---|
  | hat | 94.4 (0.2), BWT - |
  | sgd | 95.0 (0.4), BWT -1.0 (0.1) |

  <!-- end generated -->
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "toy.yaml").write_text(RESULTS)
    return tmp_path


def test_sections_and_inline_values_are_rewritten_from_their_file_and_nothing_else(folder: Path) -> None:
    tool = load_tool("docs_reference")
    assert tool.with_results(PAGE, folder) == EXPECTED
    assert tool.with_results(EXPECTED, folder) == EXPECTED
    example = "Write `<!-- generated: results/NAME:ROW:FIELD -->VALUE<!-- end generated -->` in a page.\n"
    assert tool.with_results(example, folder) == example
    assert tool.without_generated(EXPECTED) == "Intro, hat at .\n\n\n\n- in a list:\n\n\n"


def test_a_hand_edit_inside_a_generated_section_is_stale(folder: Path) -> None:
    tool = load_tool("docs_reference")
    for edited in (EXPECTED.replace("| sgd | 95.0", "| sgd | 95.1", 1), EXPECTED.replace("94.4", "94.5", 1)):
        assert tool.with_results(edited, folder) != edited
        assert tool.with_results(edited, folder) == EXPECTED


def test_a_reference_to_a_missing_row_or_field_names_it(folder: Path) -> None:
    tool = load_tool("docs_reference")
    with pytest.raises(ValueError, match="no field 'bwt' in a row 'hat'"):
        tool.ledger_values({"clbench": "{results/toy:hat:bwt}"}, folder)
    assert tool.ledger_values({"clbench": ["{results/toy:sgd:bwt} (at abc1234)"]}, folder) == {
        "clbench": ["-1.0 (0.1) (at abc1234)"]}
    (folder / "two.yaml").write_text(RESULTS.replace("tables:\n", "tables:\n  other: {columns: {a: '{approach}'}}\n"))
    with pytest.raises(ValueError, match="opens a line"):
        tool.with_results("text\n  <!-- generated: results/toy:hat:accuracy -->1<!-- end generated -->\n", folder)
    with pytest.raises(ValueError, match="has 2 tables: name one"):
        tool.with_results("<!-- generated: results/two -->\n<!-- end generated -->\n", folder)


MEASURED = re.compile(r"-?\d+\.\d+ \(\d+\.\d+\)|\d+(?:\.\d+)?e-\d+")
"""A mean with its std, or a number in scientific notation: specific enough to be the same measurement."""
BARE = re.compile(r"(?<![\w.])\d{2}\.\d+(?![\w.]| \(\d)")
"""A bare number such as 91.3 (not the mean of a mean (std))."""


def typed_again(entries: list[dict], pages: dict[str, str], folder: Path | None = None) -> list[str]:
    """Ledger values that the page a ledger row names (`page`, its hand-typed text) types again: a mean (std) or a
    scientific number of its clbench or peer value anywhere in that text; a bare number of the part typed in the
    ledger anywhere in it, and of the part read from a results file in its tables (its prose may quote an older
    run's equal number)."""
    tool = load_tool("docs_reference")
    found = []
    for entry in entries:
        raw = " ".join((entry["clbench"], (entry.get("peer") or {}).get("value", "")))
        read = str(tool.ledger_values(raw, folder) if folder else tool.ledger_values(raw))
        own = entry["page"].split("#")[0]
        text = pages.get(own, "")
        tables = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("|"))
        figures = [(figure, text) for figure in MEASURED.findall(read)]
        figures += [(figure, text) for figure in BARE.findall(tool.LEDGER_VALUE.sub("", raw))]
        figures += [(figure, tables) for figure in BARE.findall(read)]
        found += sorted({f"{entry['id']}: {figure} in {own}" for figure, where in figures
                         if re.search(r"(?<![\w.])" + re.escape(figure) + r"(?![\w]|\.\d)", where)})
    return found


def hand_typed_pages() -> dict[str, str]:
    tool = load_tool("docs_reference")
    pages = {path.name: tool.without_generated(path.read_text()) for path in (REPO / "docs").glob("*.md")
             if path.name != "reproductions.md"}
    return pages | {"README.md": (REPO / "README.md").read_text()}


def test_no_ledger_value_is_typed_again_in_a_page_outside_a_generated_section() -> None:
    entries = yaml.safe_load((REPO / "docs" / "reproductions.yaml").read_text())["entries"]
    found = typed_again(entries, hand_typed_pages())
    assert not found, ("ledger values typed in a page too: put the table in docs/results/ and read it in both "
                       "(the top of docs/reproductions.yaml says how):\n" + "\n".join(found))


def test_a_ledger_value_typed_again_in_its_page_is_found(folder: Path) -> None:
    (folder / "toy.yaml").write_text(RESULTS.replace("accuracy: \"94.4 (0.2)\"", "accuracy: \"91.3\""))
    typed = {"id": "x", "clbench": "91.3 (seeds 0-1); 95.0 (0.4) (at abc1234)", "page": "a.md#s"}
    read = {**typed, "clbench": "{results/toy:hat:accuracy} (seeds 0-1); {results/toy:sgd:accuracy} (at abc1234)"}
    for entry in (typed, read):
        assert typed_again([entry], {"a.md": "| sgd | 95.0 (0.4) |"}, folder) == ["x: 95.0 (0.4) in a.md"]
        assert typed_again([entry], {"a.md": "| si c 0.1 | 91.3 |"}, folder) == ["x: 91.3 in a.md"]
        assert typed_again([entry], {"a.md": "c 0.1 91.35, 191.3, 95.0 (0.5)", "b.md": "95.0 (0.4)"}, folder) == []
    # a bare number in prose is the same measurement only when the ledger types it
    assert typed_again([typed], {"a.md": "c 0.1 gave 91.3%"}, folder) == ["x: 91.3 in a.md"]
    assert typed_again([read], {"a.md": "c 0.1 gave 91.3%"}, folder) == []


def test_every_results_file_says_what_made_it_and_is_shown() -> None:
    tool = load_tool("docs_reference")
    used = "\n".join(path.read_text() for path in [*tool.hand_written_pages(), tool.LEDGER])
    files = sorted(tool.RESULTS.glob("*.yaml"))
    assert len(files) >= 8
    for path in files:
        data = yaml.safe_load(path.read_text())
        assert data["measured"]["commit"] and data["measured"]["commands"], f"{path.name}: no commit or commands"
        for table in data["tables"]:
            assert tool.results_table(path.stem, table)
        assert f"results/{path.stem}" in used, f"{path.name} is shown by no page and read by no ledger entry"
