"""The page in a real browser (the system Chromium via Playwright): type, click, read the translation and heatmap."""

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="transformer-serve needs the serve extra: pip install -e '.[dev,serve]'")
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test needs playwright (the dev extra)")

from tests.serve.serving import offline, offline_ids, running_server, write_checkpoint  # noqa: E402
from transformer.bench.serving import CHROMIUM, CHROMIUM_ARGS, DRAWN  # noqa: E402
from transformer.decoding.translator import Translator  # noqa: E402


def painted_cells(page) -> int:
    """How many heatmap pixels are blue (the cells), not white or grey (background, text)."""
    return page.evaluate("""() => {
        const c = document.getElementById('heatmap'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i + 2] > d[i] + 20) n++;
        return n;
    }""")


@contextmanager
def served_page(tmp_path: Path) -> Iterator[tuple[object, object]]:
    """A browser page open on a running server of a tiny checkpoint, and the server's service."""
    checkpoint = write_checkpoint(tmp_path / "tiny.safetensors")
    with running_server(checkpoint) as (url, service), sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(url, timeout=30_000)
            yield page, service
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason=f"no browser installed ({CHROMIUM}); `make test` installs "
    "Debian's chromium where it can: apt-get install chromium chromium-driver",
)
def test_the_page_translates_and_draws_the_attention(tmp_path):
    sentences = ["un chien rouge court.", "le chat dort dans le parc."]
    with served_page(tmp_path) as (page, service):
        page.fill("#source", " ".join(sentences))
        page.fill("#beam", "2")
        page.click("#translate")
        page.wait_for_function(f"{DRAWN} === '1'", timeout=60_000)
        expected = offline(service, sentences, beam_size=2)
        assert page.text_content("#output") == " ".join(expected)
        assert page.locator("#sentences li").count() == 2
        source = service.tokenizer.encode_src([sentences[0]])[0]
        target = offline_ids(service, sentences[0], beam_size=2)
        heatmap = page.locator("#heatmap")
        assert heatmap.get_attribute("data-columns") == str(len(source) + 1)  # + </s>
        assert heatmap.get_attribute("data-rows") == str(len(target) + 1)
        assert painted_cells(page) > 0
        page.click("#sentences li:nth-child(2)")
        page.wait_for_function(f"{DRAWN} === '2'", timeout=60_000)
        assert "sentence 2" in page.text_content("#attention-title")
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        assert (tmp_path / "page.png").stat().st_size > 1000


HOSTILE = [  # markup, right-to-left text, a ZWJ emoji family and a combining accent
    "<script>window.pwned=1</script>",
    "<img src=x onerror=window.pwned=2>",
    "שלום עולם",
    "👩\u200d👩\u200d👧 é\u0301",
]


@pytest.mark.slow
@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no browser installed ({CHROMIUM})")
def test_the_page_shows_markup_and_rtl_text_as_text_and_runs_none_of_it(tmp_path):
    with served_page(tmp_path) as (page, _):
        page.fill("#source", "\n".join(HOSTILE))
        page.click("#translate")
        page.wait_for_function(f"{DRAWN} === '1'", timeout=60_000)
        shown = page.text_content("#sentences")
        assert all(text in shown for text in HOSTILE), shown
        assert page.evaluate("window.pwned") is None
        assert page.locator("#sentences script, #sentences img, #output script, #output img").count() == 0


@pytest.mark.slow
@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no browser installed ({CHROMIUM})")
def test_typing_the_english_shows_three_ways_on_and_a_click_takes_one(tmp_path):
    """The type-ahead box: as the user types, the alternatives the service gives for that prefix (greedy, three),
    each starting with what was typed; clicking one puts it in the box."""
    with served_page(tmp_path) as (page, service):
        page.fill("#source", "le chat dort dans le parc.")
        page.locator("#prefix").press_sequentially("a c", delay=20)
        page.wait_for_function("document.getElementById('alternatives').dataset.prefix === 'a c'", timeout=60_000)
        shown = [item.text_content() for item in page.locator("#alternatives li").all()]
        cfg = dataclasses.replace(service.defaults, strategy="greedy", alternatives=3)
        translator = Translator(service.model, service.tokenizer, cfg)
        expected = [text for text, _ in translator.translate_nbest(["le chat dort dans le parc."], prefixes=["a c"])[0]]
        assert shown == expected and len(shown) == 3 and all(text.startswith("a c") for text in shown)
        page.click("#alternatives li:nth-child(2)")
        assert page.input_value("#prefix") == expected[1]


@pytest.mark.slow
@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"no browser installed ({CHROMIUM})")
def test_pasted_markup_comes_back_around_the_translation_as_text(tmp_path):
    with served_page(tmp_path) as (page, _):
        page.fill("#source", 'un <b>chien</b> <a href="#">rouge</a> court {n}')
        page.check("#markup")
        page.click("#translate")
        page.wait_for_function(f"{DRAWN} === '1'", timeout=60_000)
        shown = page.text_content("#output")
        assert all(shown.count(tag) == 1 for tag in ("<b>", "</b>", '<a href="#">', "</a>", "{n}")), shown
        assert page.locator("#output b, #output a").count() == 0  # shown as text, not rendered
        assert "-" in page.get_attribute("#sentences li", "title")  # the word alignment
