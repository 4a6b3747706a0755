"""What the benchmarks and measurements in `scripts/` share, so that no script imports another: the engines timed
(`engines`), timing and CPU description (`timing`), a server under load (`serving`), training curves (`curves`),
MarianMT of our sizes (`marian_reference`) and a tiny random checkpoint (`tiny`). It may import every layer but
`cli`; nothing outside `scripts/` and the tests imports it."""
