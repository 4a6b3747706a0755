"""The attention walk-through (docs/attention.md): its numbers, figures and text, computed by the project's own code.

`sections` computes the numbers (with `kv_cache` and `variants`), `page` renders the page and draws the
figures from them; `scripts/attention_walkthrough.py` writes them to docs/. It may import `runs` and every layer
below it.
"""
