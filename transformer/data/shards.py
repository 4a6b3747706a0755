"""Tokenized pairs on disk: Arrow stream files of `src_ids`/`tgt_ids` lists in the smallest integer type the
vocabulary fits (uint16 up to 65,535 pieces), plus the text where something reads it (val and test sets).

A split is a folder of `shard-NNNNN.arrow` files read in name order; `datasets` memory-maps them, so a split far
larger than memory costs only the pages a batch touches. A shard is written to a temporary name and renamed, so a
kill leaves whole shards or none.
"""

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa

from transformer.core.files import disk_errors

SHARD = "shard-{:05d}.arrow"


def id_type(vocab_size: int) -> pa.DataType:
    """The smallest unsigned Arrow integer type that holds every id of a `vocab_size` vocabulary."""
    return pa.uint16() if vocab_size <= 2**16 else pa.uint32()


def id_column(lengths: np.ndarray, values: np.ndarray, kind: pa.DataType) -> pa.ListArray:
    """An Arrow list column from per-row lengths and the concatenated values (offsets are int32 per shard)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type=kind))


def write_shard(path: Path, columns: dict[str, pa.Array]) -> None:
    """Write one shard (a single record batch) to `path` through a temporary name in the same folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    batch = pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))
    with disk_errors(path):
        try:
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


def shard_paths(folder: Path) -> list[Path]:
    """The finished shards of a split folder, in order."""
    return sorted(folder.glob("shard-*.arrow"))


def rows(paths: Iterable[Path]) -> int:
    """How many rows the shards hold (read from their metadata; no data is loaded)."""
    total = 0
    for path in paths:
        with pa.memory_map(str(path)) as source:
            total += sum(batch.num_rows for batch in pa.ipc.open_stream(source))
    return total
