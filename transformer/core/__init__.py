"""Settings and plumbing that every layer reads, without torch: the settings' schemas (`config`), the tables of
decoding strategies (`strategies`) and precisions (`precision`), presets of `configs/`, user errors, atomic files,
locks, the special token ids and handing freed memory back. It imports nothing else of the package."""
