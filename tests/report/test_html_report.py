"""`clbench report --html FILE`: one self-contained page (clbench.report.html_page) on the golden fixture folder.

Its tables are exactly what `report --format html` prints for the same options; its figures are embedded PNGs;
nothing in it points outside the file; every run is in its provenance section; text from the data is escaped.
"""

from __future__ import annotations

import base64
import html
import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image
from resultbuilders import golden_results, write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.formatting import Table
from clbench.report.loading import Results, load_results
from clbench.report.monitoring import MonitoringReporter
from clbench.report.tables import build_report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, ["report", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def make_page(results: Path, page: Path, *options: str) -> str:
    result = CliRunner().invoke(app, ["report", "b", "--results", str(results), "--html", str(page), *options])
    assert result.exit_code == 0, result.output
    return page.read_text()


def tables_block(page: str, kind: str) -> str:
    """The HTML of the page's tables of `kind` (`<div class="tables" data-table="KIND">`)."""
    found = re.findall(rf'<div class="tables" data-table="{re.escape(kind)}">\n(.*?)</div>\n', page, re.DOTALL)
    assert len(found) == 1, f"{len(found)} blocks of {kind}"
    return found[0]


def figures(page: str, kind: str) -> list[tuple[str, str | None]]:
    """(alt text, caption or None) of each <figure> in the page's one `<div class="KIND">`."""
    [block] = re.findall(rf'<div class="{re.escape(kind)}">\n(.*?)\n</div>\n', page, re.DOTALL)
    return [(alt, caption or None) for alt, caption in re.findall(
        r'<figure><img src="[^"]*" alt="([^"]*)">(?:<figcaption>([^<]*)</figcaption>)?</figure>', block)]


class TablesOnlyReporter(MonitoringReporter):
    """A plugin's reporter with one table and no figures."""

    def tables(self, results: Results) -> list[Table]:
        return [Table(["runs"], [[str(sum(run["method"] == self.method for run in results.info.values()))]],
                      title=f"{self.method}: tables only")]


class Images(HTMLParser):
    """The src of every <img>, and every href / src attribute of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
        self.links += [value or "" for name, value in attrs if name in ("href", "src")]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return golden_results(tmp_path_factory.mktemp("golden"))


@pytest.fixture(scope="module")
def page(results: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_page(results, tmp_path_factory.mktemp("page") / "report.html")


@pytest.mark.parametrize(("kind", "options"), [
    ("table", []), ("summary-task-aware", ["--summary"]),
    ("summary-task-agnostic", ["--summary", "--evaluation", "task-agnostic"]), ("time", ["--time"]),
    ("monitoring-hat", ["--monitoring"])])
def test_the_pages_tables_are_report_format_html(results: Path, page: str, kind: str, options: list[str]) -> None:
    printed = cli("b", "--results", str(results), "--format", "html", *options)
    assert tables_block(page, kind) == printed
    assert "<table>" in printed


def test_the_pages_options_reach_its_tables(results: Path, tmp_path: Path) -> None:
    options = ["--metric", "accuracy", "--ci", "--references", "--seeds", "0,1"]
    page = make_page(results, tmp_path / "report.html", *options)
    assert tables_block(page, "table") == cli("b", "--results", str(results), "--format", "html", *options)
    for evaluation in ("task-aware", "task-agnostic"):
        assert tables_block(page, f"summary-{evaluation}") == cli("b", "--results", str(results), "--format", "html",
                                                                  "--summary", "--evaluation", evaluation, *options)
    assert "±" in tables_block(page, "table") and "<td>joint</td>" in tables_block(page, "table")
    assert "b/hat/h1/seed-2" not in tables_block(page, "provenance")  # --seeds 0,1


def test_every_image_is_an_embedded_png(page: str) -> None:
    parser = Images()
    parser.feed(page)
    # the curves, one heat map per approach (hat, sgd, ewc, joint, random), HAT's capacity, layers and reuse
    assert len(parser.images) >= 1 + 5 + 3
    for source in parser.images:
        prefix = "data:image/png;base64,"
        assert source.startswith(prefix)
        data = base64.b64decode(source[len(prefix):], validate=True)
        assert data.startswith(PNG_SIGNATURE)
        image = Image.open(io.BytesIO(data))
        image.verify()
        assert image.size[0] > 0 and image.size[1] > 0


def test_curves_and_monitoring_figures_have_captions_and_heat_maps_do_not(page: str) -> None:
    """A heat map's title names its approach already; the curves and the monitoring figures say what they show."""
    caption = "forgetting-ratio per stage, mean over seeds"
    assert figures(page, "curves") == [(caption, caption)]
    assert figures(page, "matrices") == [(method, None) for method in ("ewc", "hat", "joint", "random", "sgd")]
    stems = ["b-hat-capacity", "b-hat-layers", "b-hat-reuse"]
    assert figures(page, "figures") == [(stem, stem) for stem in stems]


def test_a_monitoring_section_with_tables_and_no_figures_is_on_the_page(tmp_path: Path) -> None:
    for seed in (0, 1):
        write_run_json(write_run(tmp_path / "results", "fake", seed, [[0.9], [0.8, 0.9]]),
                       monitoring_reporter="test_html_report:TablesOnlyReporter")
    page = make_page(tmp_path / "results", tmp_path / "page.html")
    printed = cli("b", "--results", str(tmp_path / "results"), "--format", "html", "--monitoring")
    assert "fake: tables only" in printed and tables_block(page, "monitoring-fake") == printed
    section = page[page.index('id="b-monitoring-fake"'):page.index('id="b-provenance"')]
    assert 'data-table="monitoring-fake"' in section and "<figure>" not in section


def test_the_page_needs_nothing_outside_it(page: str) -> None:
    parser = Images()
    parser.feed(page)
    assert re.search(r"https?://", page) is None
    assert "<script" not in page and "<link" not in page and "@import" not in page and "url(" not in page
    assert all(link.startswith(("data:", "#")) for link in parser.links)
    anchors = set(re.findall(r' id="([^"]+)"', page))
    assert {link[1:] for link in parser.links if link.startswith("#")} <= anchors  # the contents' links resolve


def test_the_provenance_lists_every_run_with_its_config_hash(results: Path, page: str) -> None:
    block = tables_block(page, "provenance")
    assert page.index("<details>") < page.index('data-table="provenance"') < page.index("</details>")
    loaded = load_results(results, "b")
    for run_id, run in loaded.info.items():
        assert f"<tr><td>{run_id}</td><td>complete</td><td>{run['config_hash']}</td><td>{run['seed']}</td>" in block
    assert "<tr><td>b/sgd/c0/seed-2</td><td>failed</td><td>c0</td><td>2</td>" in block  # run.json only
    assert block.count("<tr><td>b/") == len(loaded.info) + 1


def test_a_missing_reference_is_named_as_the_table_notes_name_it(tmp_path: Path) -> None:
    results = golden_results(tmp_path / "results")
    write_run_json(write_run(results, "sgd", 3, [[0.9], [0.6, 0.9], [0.5, 0.6, 0.9]]))  # no joint of seed 3
    notes = [note for note in build_report(results, "b").notes if note.startswith("left out b/sgd/c0/seed-3: no joint")]
    assert len(notes) == 1
    page = make_page(results, tmp_path / "report.html")
    assert f"<li>{html.escape(notes[0])}</li>" in tables_block(page, "table")


def test_text_from_the_data_is_escaped(tmp_path: Path) -> None:
    results = golden_results(tmp_path / "results")
    for config, value in (("x1", "<img src=x onerror=alert(1)>"), ("x2", "a & b")):
        write_run_json(write_run(results, "sgd", 0, [[0.9], [0.6, 0.9], [0.5, 0.6, 0.9]], config_hash=config,
                                 hyperparameters={"note": value}))
    page = make_page(results, tmp_path / "report.html")
    assert "<img src=x" not in page and "onerror=alert(1)>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # in tables, figure captions and alt texts
    assert 'alt="sgd (note=&lt;img src=x onerror=alert(1)&gt;)"' in page


def test_without_a_benchmark_the_page_has_every_benchmark(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for benchmark in ("one", "two"):
        for method, value in (("joint", 0.9), ("random", 0.5), ("sgd", 0.7)):
            write_run(results, method, 0, [[0.9], [value, 0.9]], benchmark=benchmark)
    page_file = tmp_path / "all.html"
    result = CliRunner().invoke(app, ["report", "--results", str(results), "--html", str(page_file)])
    assert result.exit_code == 0, result.output
    page = page_file.read_text()
    assert '<h2 id="one">one</h2>' in page and '<h2 id="two">two</h2>' in page
    assert 'data-table="table"' in page and page.count('data-table="provenance"') == 2
    assert '<a href="#two-provenance">' in page


def test_html_with_a_table_option_is_refused(results: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", "b", "--results", str(results), "--html", str(tmp_path / "p.html"),
                                      "--summary", "--format", "latex"])
    assert result.exit_code != 0
    assert "leave out --summary, --format" in " ".join(result.output.split())
    assert not (tmp_path / "p.html").exists()


def test_a_reporter_that_cannot_be_imported_is_named_and_the_page_is_written(tmp_path: Path) -> None:
    for seed in (0, 1):
        write_run_json(write_run(tmp_path / "results", "fake", seed, [[0.9], [0.8, 0.9]]),
                       monitoring_reporter="no_such_module:Reporter")
    page = make_page(tmp_path / "results", tmp_path / "page.html")
    section = page[page.index('id="b-monitoring-fake"'):]
    assert "monitoring reporter &#x27;no_such_module:Reporter&#x27; of method &#x27;fake&#x27; cannot be imported" \
        in section
