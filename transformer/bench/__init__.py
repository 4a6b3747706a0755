"""What the benchmarks and measurements in `scripts/` share, so that no script imports another: the engines timed
(`engines`), timing and CPU description (`timing`), a server under load (`serving`), training curves (`curves`), the
int8 products compared (`int8_products`), n-best rerankers (`rerank`) and a tiny random checkpoint (`tiny`).
Nothing outside `scripts/` and the tests imports it."""
