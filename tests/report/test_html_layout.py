"""The HTML page's layout (issue 58, item 7): every figure fits the page (the continual figure is wider than a
screen), and the plain-text maths of titles and notes (`a^{<=t}`) is written as HTML, not shown raw."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

from PIL import Image
from resultbuilders import golden_results, hand_curve, write_curve_file, write_run, write_run_json
from typer.testing import CliRunner

from clbench.cli import app
from clbench.report.html_page import STYLE
from clbench.report.render import math_html

WIDE = [[0.9], [0.7, 0.9], [0.6, 0.7, 0.9]]


def page_of(results: Path, page: Path, *options: str) -> str:
    result = CliRunner().invoke(app, ["report", "b", "--results", str(results), "--html", str(page), *options])
    assert result.exit_code == 0, result.output
    return page.read_text()


def css_rules(style: str) -> dict[str, str]:
    """selector -> declarations of each rule of a style sheet (a rule with several selectors under each)."""
    rules: dict[str, str] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", style):
        for selector in selectors.split(","):
            rules[" ".join(selector.split())] = rules.get(" ".join(selector.split()), "") + body
    return rules


def test_every_figure_is_held_to_the_page_width(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for method in ("sgd", "ewc", "er", "derpp", "agem"):  # five panels: the continual figure is ~3,000 px wide
        run_dir = write_run(results, method, 0, WIDE)
        write_run_json(run_dir)
        write_curve_file(run_dir, hand_curve())
    page = page_of(results, tmp_path / "page.html")
    rules = css_rules(STYLE)
    assert "max-width: 100%" in rules["figure img"] and "height: auto" in rules["figure img"]
    assert "max-width: 100%" in rules["figure"]
    images = re.findall(r'(<figure>)?<img src="data:image/png;base64,([^"]+)"', page)
    assert images and all(opened for opened, _ in images)  # every image in a <figure>, so the rule holds it
    widths = [Image.open(io.BytesIO(base64.b64decode(data))).width for _, data in images]
    assert max(widths) > 1400  # the rule matters: without it this figure runs off a 1,400 px screen


def test_monitoring_captions_write_the_maths_as_html(tmp_path: Path) -> None:
    page = page_of(golden_results(tmp_path / "results"), tmp_path / "page.html")
    captions = re.findall(r"<caption>(.*?)</caption>", page)
    assert not [caption for caption in captions if "^{" in caption or "^t" in caption]
    assert any("a<sup>&le;t</sup>" in caption for caption in captions)
    assert any("a<sup>t</sup>, task t alone" in caption for caption in captions)
    notes = re.findall(r"<li>(.*?)</li>", page)
    assert not [note for note in notes if "^{" in note]


def test_math_html_writes_scripts_and_escapes_the_rest() -> None:
    assert math_html("used by a^{<=t}, all tasks") == "used by a<sup>&le;t</sup>, all tasks"
    assert math_html("2/2^n and A_{J}") == "2/2<sup>n</sup> and A<sub>J</sub>"
    assert math_html("training.eval_every <b>") == "training.eval_every &lt;b&gt;"  # a bare _ is a name's
