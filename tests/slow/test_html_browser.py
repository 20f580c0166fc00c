"""The HTML report (`clbench report --html`) in a real browser: headless Chromium loads it with no console message
and every image decodes (naturalWidth > 0). Slow (one Chromium start per page, about 2 s); skipped without
Chromium (`apt-get install chromium`).

No new dependency: Chromium's `--dump-dom` prints the DOM after the load event, and `--enable-logging=stderr
--v=0` writes console messages to stderr as `CONSOLE` lines. The test loads a copy of the page with a test-only
script appended that writes each image's naturalWidth into a data attribute, then reads the dumped DOM. The
harness is checked first on a page with a broken image and a console message, so that it can fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from resultbuilders import golden_results

from clbench.report.html_page import build_page
from clbench.report.html_sections import PageOptions

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("chromium") is None, reason="no Chromium found (shutil.which('chromium')"
                                 "); install it with `apt-get install chromium` to run this test")]

PROBE = """<script>
window.addEventListener("load", () => {
  for (const image of document.images) { image.setAttribute("data-natural-width", String(image.naturalWidth)); }
  document.body.setAttribute("data-loaded", "yes");
});
</script>
"""


def load_in_chromium(page: str, folder: Path) -> tuple[list[int], list[str]]:
    """(naturalWidth of every image, console lines) of `page` opened from a file in headless Chromium."""
    path = folder / "probed.html"
    path.write_text(page.replace("</body>", PROBE + "</body>"))
    done = subprocess.run([str(shutil.which("chromium")), "--headless", "--no-sandbox", "--disable-gpu",
                           "--enable-logging=stderr", "--v=0", f"--user-data-dir={folder / 'profile'}",
                           "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'data-loaded="yes"' in done.stdout, "the load event did not run: " + done.stderr[-2000:]
    widths = [int(width) for width in re.findall(r'data-natural-width="(\d+)"', done.stdout)]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return widths, console


def test_the_harness_sees_a_broken_image_and_a_console_message(tmp_path: Path) -> None:
    page = ('<!DOCTYPE html><html><body><img src="data:image/png;base64,AAAA">'
            '<script>console.error("probe");</script></body></html>')
    widths, console = load_in_chromium(page, tmp_path)
    assert widths == [0]
    assert len(console) == 1 and "probe" in console[0]


def test_the_page_loads_with_no_console_message_and_every_image_renders(tmp_path: Path) -> None:
    results = golden_results(tmp_path / "results")
    page = build_page(results, [("b", None)], PageOptions())
    widths, console = load_in_chromium(page, tmp_path)
    assert console == [], console
    assert len(widths) == page.count("<img ") >= 9
    assert all(width > 0 for width in widths), widths
