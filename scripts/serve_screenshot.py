"""The README's picture of the page: transformer-serve on a checkpoint, a paragraph typed into the page in Chromium.

    python scripts/serve_screenshot.py --checkpoint outputs/fren_s33 --output docs/serve_page.png

Needs the serve extra, playwright (the dev extra) and Debian's Chromium (`make browser`).
"""

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

from transformer.bench.serving import CHROMIUM, CHROMIUM_ARGS, DRAWN, start_server

TEXT = "Un homme avec un chapeau orange regarde quelque chose. Deux chiens jouent dans la neige."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="run directory or .safetensors file")
    parser.add_argument("--output", type=Path, default=Path("docs/serve_page.png"))
    parser.add_argument("--text", default=TEXT, help="what to type into the page")
    args = parser.parse_args()
    server_args = argparse.Namespace(checkpoint=args.checkpoint, decoding="beam", threads=0, max_wait_ms=None)
    process, url = start_server(server_args, batching=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(url, timeout=30_000)
            page.fill("#source", args.text)
            page.fill("#nbest", "2")
            page.click("#translate")
            page.wait_for_function(f"{DRAWN} === '1'", timeout=60_000)
            page.screenshot(path=str(args.output), full_page=True)
            browser.close()
    finally:
        process.terminate()
        process.wait(timeout=60)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
