"""The course as a website, tested in a real browser.

The site is built from the lessons this session executed (the same single run the notebook tests
read), served on 127.0.0.1, and every page is opened in headless Chromium (Debian's package,
installed here when missing; Playwright drives it, no browser is downloaded): no console errors,
every image loads, lesson plots are on their pages, search finds a lesson by a word it teaches,
internal links resolve, and the layout fits a phone. Screenshots of the landing page and one
lesson are written to build/site-screens/ (next to the site) for review.
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

from conftest import LESSON_IDS, ROOT, TEST_RUN
from tpututor_course import runner, site

pytestmark = [pytest.mark.slow, pytest.mark.lessons]
CHROMIUM = "/usr/bin/chromium"
LANGS = ("en", "ko") if any((ROOT / "notebooks" / "ko").glob("[0-9][0-9]*_*.ipynb")) else ("en",)


def ensure_chromium() -> str:
    """Debian's Chromium, which `make system` installs (make test runs it first)."""
    found = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if not found:
        pytest.skip("no Chromium here: make system (or apt-get install chromium fonts-noto-cjk)")
    return found


@pytest.fixture(scope="module")
def built(executed):
    results = [executed(stem) for stem in LESSON_IDS]
    runner.write_timings(results, TEST_RUN / "timings.json", "ci", results[0].device or "this machine")
    out = TEST_RUN.parent / "site"
    failed = site.build(TEST_RUN, out, "en", LANGS, root=ROOT)
    assert failed == [], f"lessons failed, and their pages say so: {failed}"
    if "ko" in LANGS:  # the Korean edition: its prose over the English run's outputs
        assert site.build(TEST_RUN, out, "ko", LANGS, root=ROOT) == []
    return out


@pytest.fixture(scope="module")
def served(built):
    handler = functools.partial(QuietHandler, directory=str(built))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", built
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no request log on the test's output
        pass


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    executable = ensure_chromium()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def pages(site_dir: Path) -> list[str]:
    return sorted(
        str(p.relative_to(site_dir))
        for lang in LANGS
        for p in (site_dir / lang).rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts
    )


def lesson_images(page) -> tuple[list[str], list[str]]:
    """(the plots' sources, the launch badges' alt texts) in a lesson page's main column; the badges are
    images too (site.py draws them locally), and are told apart by their alt text."""
    imgs = page.evaluate("() => [...document.querySelectorAll('main img')].map(i => [i.getAttribute('src'), i.alt])")
    badges = [alt for _, alt in imgs if alt.startswith(("Open in", "Launch"))]
    plots = [src for src, alt in imgs if src and "_images/" in src and alt not in badges]
    return plots, badges


def plots_in(stem: str) -> int:
    nb = nbformat.read(TEST_RUN / f"{stem}.ipynb", as_version=4)
    return sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def test_every_page_loads_without_console_errors_and_every_image_loads(served, browser):
    base, site_dir = served
    problems = []
    for name in pages(site_dir):
        page = browser.new_page()
        errors, failed = [], []
        page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
        page.on("requestfailed", lambda r, failed=failed: failed.append(r.url) if r.url.startswith(base) else None)
        page.goto(f"{base}/{name}", wait_until="load")
        images = page.evaluate("() => [...document.images].map(i => [i.src, i.complete && i.naturalWidth > 0])")
        problems += [f"{name}: console error {e}" for e in errors] + [f"{name}: failed {u}" for u in failed]
        problems += [f"{name}: image did not load {src}" for src, ok in images if not ok]
        page.close()
    assert not problems, "\n".join(problems[:40])


def test_lesson_pages_carry_their_plots_badges_and_the_machine_that_made_them(served, browser):
    base, _ = served
    page = browser.new_page()
    for stem in LESSON_IDS:
        page.goto(f"{base}/en/lessons/{stem}.html", wait_until="load")
        text = page.inner_text("main")
        assert "make run" in text and "profile" in text, f"{stem}: no banner naming the machine and profile"
        plots, badges = lesson_images(page)
        assert len(plots) >= plots_in(stem), f"{stem}: {len(plots)} plots on the page, {plots_in(stem)} in the notebook"
        assert "Open in Colab" in badges, f"{stem}: no Colab badge"
        links = page.evaluate("() => [...document.querySelectorAll('main a')].map(a => a.href)")
        assert any("/edit/" in u for u in links) and any("kaggle.com/kernels" in u for u in links), stem


def search(base: str, browser, query: str) -> list[str]:
    """The links the English site's search page lists for ``query``."""
    page = browser.new_page()
    page.goto(f"{base}/en/search.html?q={query}", wait_until="load")
    page.wait_for_selector("ul.search li", timeout=20000)
    return page.evaluate("() => [...document.querySelectorAll('ul.search li a')].map(a => a.href)")


def test_search_finds_a_lesson_by_a_word_it_teaches(served, browser):
    found = search(served[0], browser, "block_until_ready")
    assert any("00a_where_am_i" in u for u in found), found[:10]


def test_search_finds_an_error_atlas_entry_by_a_phrase_of_its_message(served, browser):
    found = search(served[0], browser, "TracerBoolConversionError")
    assert any("/errors.html" in u for u in found), found[:10]


@pytest.mark.skipif(LANGS == ("en",), reason="no Korean edition in notebooks/ko/ yet")
def test_the_korean_site_shows_korean_prose_over_the_same_outputs_and_links_the_english(served, browser):
    base, _ = served
    page = browser.new_page()
    page.goto(f"{base}/ko/index.html", wait_until="load")
    assert "레슨" in page.inner_text("body")
    hrefs = page.evaluate("() => [...document.querySelectorAll('a')].map(a => a.getAttribute('href'))")
    assert "../en/index.html" in hrefs, "the language link to the English site"
    stem = LESSON_IDS[0]
    page.goto(f"{base}/ko/lessons/{stem}.html", wait_until="load")
    text = page.inner_text("main")
    assert re.search("[가-힣]{2,}", text), "Korean prose on the Korean lesson page"
    assert len(lesson_images(page)[0]) >= plots_in(stem), "the English run's plots under the Korean prose"
    links = page.evaluate("() => [...document.querySelectorAll('main a')].map(a => a.href)")
    assert any("notebooks/ko/" in u for u in links) and any(f"i18n/ko/{stem}.po" in u for u in links)


@pytest.mark.skipif(LANGS == ("en",), reason="no Korean edition in notebooks/ko/ yet")
def test_the_korean_pages_draw_hangul_glyphs_not_empty_boxes(served, browser):
    # Without a Korean font every syllable is drawn as the same "missing glyph" box, so two different
    # syllables in the page's own font give the same pixels; `make system` installs fonts-noto-cjk.
    base, _ = served
    page = browser.new_page()
    page.goto(f"{base}/ko/lessons/{LESSON_IDS[0]}.html", wait_until="load")
    drawn = page.evaluate("""() => {
        const font = getComputedStyle(document.querySelector('main p')).fontFamily;
        const draw = (text) => {
            const canvas = document.createElement('canvas');
            canvas.width = 64; canvas.height = 64;
            const ctx = canvas.getContext('2d');
            ctx.font = `40px ${font}`;
            ctx.fillText(text, 4, 48);
            return Array.from(ctx.getImageData(0, 0, 64, 64).data).join(',');
        };
        return {ga: draw('가'), han: draw('한'), missing: draw('\\u{10FFFD}')};
    }""")
    assert drawn["ga"] != drawn["han"], "two Hangul syllables drew the same box: no Korean font (make system)"
    assert drawn["han"] != drawn["missing"], "Hangul drew as a missing glyph: no Korean font (make system)"


def test_each_site_takes_the_error_atlas_page_of_its_own_language():
    assert site.guide_page(ROOT, "errors", "en") == ROOT / "docs" / "errors.md"
    assert site.guide_page(ROOT, "errors", "ko") == ROOT / "docs" / "errors.ko.md"
    assert site.guide_page(ROOT, "no-such-guide", "ko") is None


@pytest.mark.skipif(LANGS == ("en",), reason="no Korean edition in notebooks/ko/ yet")
def test_the_korean_site_links_its_korean_error_atlas(served, browser):
    base, _ = served
    page = browser.new_page()
    page.goto(f"{base}/ko/index.html", wait_until="load")
    hrefs = page.evaluate("() => [...document.querySelectorAll('main a')].map(a => a.getAttribute('href'))")
    assert "errors.html" in hrefs, "the Korean landing page's guides list the error atlas"
    page.goto(f"{base}/ko/errors.html", wait_until="load")
    text = page.inner_text("main")
    assert "오류 아틀라스" in text and "TracerBoolConversionError" in text, "Korean prose, the English messages"
    assert page.locator("#jax-tracer-bool").count() == 1, "the entries keep their anchors"


def test_every_page_names_an_icon_that_loads_so_no_browser_asks_for_favicon_ico(served):
    # Without a <link rel="icon">, Chromium fetches /favicon.ico; a 404 there is a console error on
    # whichever page it lands, at a time of the browser's choosing.
    base, site_dir = served
    icons = set()
    for name in pages(site_dir):
        html = (site_dir / name).read_text(encoding="utf-8")
        found = re.search(r'<link rel="icon" href="([^"]+)"', html)
        assert found, f'{name}: no <link rel="icon">'
        icons.add(urllib.parse.urljoin(f"{base}/{name}", found.group(1)))
    for url in sorted(icons):
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200 and resp.headers.get_content_type() == "image/svg+xml", url


def test_internal_links_resolve(served, browser):
    base, site_dir = served
    page = browser.new_page()
    targets = set()
    for name in pages(site_dir):
        page.goto(f"{base}/{name}", wait_until="domcontentloaded")
        for href in page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)"):
            if href.startswith(base):
                targets.add(urllib.parse.urldefrag(href)[0])
    broken = []
    for url in sorted(targets):
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                if resp.status != 200:
                    broken.append(f"{url}: {resp.status}")
        except urllib.error.HTTPError as err:
            broken.append(f"{url}: {err.code}")
    assert targets and not broken, "\n".join(broken[:40])


def test_layout_reads_on_a_phone_and_screenshots_are_written(served, browser):
    base, site_dir = served
    screens = site_dir.parent / "site-screens"
    screens.mkdir(exist_ok=True)
    desktop = browser.new_page(viewport={"width": 1280, "height": 900})
    desktop.goto(f"{base}/en/index.html", wait_until="load")
    desktop.screenshot(path=str(screens / "landing.png"), full_page=False)
    desktop.goto(f"{base}/en/lessons/{LESSON_IDS[0]}.html", wait_until="load")
    desktop.screenshot(path=str(screens / "lesson.png"), full_page=False)
    phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
    for name in ("en/index.html", f"en/lessons/{LESSON_IDS[0]}.html"):
        phone.goto(f"{base}/{name}", wait_until="load")
        overflow = phone.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} is {overflow}px wider than a phone's screen"
    phone.screenshot(path=str(screens / "lesson-phone.png"))
    assert all((screens / f).stat().st_size > 10_000 for f in ("landing.png", "lesson.png", "lesson-phone.png"))


def test_every_documented_docstring_is_valid_restructuredtext_so_the_strict_site_build_passes():
    """The site builds with ``-W``: one malformed docstring (an indented block without ``::``, a
    ragged table) fails it after every lesson has run. Catch it here in a second instead."""
    import importlib
    import inspect
    import io

    import docutils.core
    from docutils.parsers.rst import roles

    for role in ("func", "class", "meth", "mod", "data", "attr", "exc", "obj"):
        roles.register_generic_role(role, __import__("docutils").nodes.literal)
    problems = []
    for name in site.learner_modules():
        module = importlib.import_module(f"tpututor.{name}")
        docs = {name: inspect.getdoc(module)}
        for member, obj in vars(module).items():
            if not member.startswith("_") and getattr(obj, "__module__", None) == module.__name__:
                docs[f"{name}.{member}"] = inspect.getdoc(obj)
        for where, doc in docs.items():
            if doc:
                stream = io.StringIO()
                docutils.core.publish_doctree(doc, settings_overrides={"warning_stream": stream, "report_level": 2})
                if stream.getvalue():
                    problems.append(f"{where}: {stream.getvalue().strip()}")
    assert not problems, "\n".join(problems)
