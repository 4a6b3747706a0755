"""`transformer-serve`: translation over HTTP with dynamic batching and a page that shows the attention.

Needs the `serve` extra (FastAPI, uvicorn, prometheus-client, pysbd). It may import `runs` and every layer below it;
only `cli` imports it.
"""
