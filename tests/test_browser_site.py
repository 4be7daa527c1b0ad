"""The course's website in a real browser: a chapter page served over HTTP shows a picture the notebook
drew and an exercise's statement on screen, and the site's search finds a chapter.

Needs /usr/bin/chromium (`make browser-deps`) and playwright (the dev extra); deselected by default,
`make ci` runs it after `make site` (the page is built here when that site is not there).
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
BUILT = ROOT / "build" / "site" / "html"
SCREENSHOTS = ROOT / "ci-reports" / "browser"
CHAPTER = "01_tensors"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is not installed: run `make browser-deps` (apt-get install chromium)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> str:
    """The site over HTTP on loopback (`make site`'s, or chapter 01's built here); yields its base URL."""
    html_dir = BUILT
    if not (BUILT / f"{CHAPTER}.html").is_file():
        import website

        html_dir = website.build([CHAPTER], fast=True, jobs=1, out=tmp_path_factory.mktemp("site"),
                                 cache=ROOT / "build" / "site" / "executed")
    handler = functools.partial(QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


# the first picture on the page that the browser decoded and that lies on screen, as (width, height)
PICTURE = """() => {
    for (const img of document.querySelectorAll("img[src*='_images/']")) {
        const box = img.getBoundingClientRect();
        if (img.complete && img.naturalWidth > 0 && box.width > 50 && box.top >= 0 && box.bottom <= innerHeight)
            return [img.naturalWidth, img.naturalHeight];
    }
    return null;
}"""


def test_a_chapter_page_shows_a_picture_and_an_exercise_statement_on_screen(site, tmp_path):
    shots = SCREENSHOTS if os.access(ROOT, os.W_OK) else tmp_path
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        try:
            page.goto(f"{site}/{CHAPTER}.html", wait_until="load", timeout=60_000)
            figure = page.locator("img[src*='_images/']").first  # a picture a cell drew
            figure.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            picture = page.evaluate(PICTURE)
            page.screenshot(path=str(shots / f"site-{CHAPTER}-picture.png"))
            statement = page.get_by_role("heading", name="Exercise 1 — Puzzle: a checkerboard (20 points)")
            statement.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            statement_visible = statement.is_visible() and statement.bounding_box()["y"] >= 0
            colab = page.get_by_role("link", name="Open in Colab").first.get_attribute("href")
            page.screenshot(path=str(shots / f"site-{CHAPTER}-exercise.png"))
            page.goto(f"{site}/search.html?q=strides", wait_until="load", timeout=60_000)
            page.wait_for_selector("#search-results li", timeout=30_000)
            hits = page.locator("#search-results li").count()
            page.screenshot(path=str(shots / "site-search.png"))
        finally:
            browser.close()
    assert picture is not None and picture[0] > 100, "no picture decoded and on screen on the chapter's page"
    assert statement_visible, "the first exercise's statement is not on screen"
    assert colab.startswith("https://colab.research.google.com/github/") and colab.endswith(
        f"/notebooks/{CHAPTER}/tensors.ipynb")
    assert hits >= 1, "the site's search found nothing for 'strides'"
