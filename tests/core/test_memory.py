"""Handing freed memory back: after many small blocks are freed behind one still in use, the allocator keeps their
pages until `release_free_memory` asks it to return them (glibc's or tcmalloc's call, on Linux)."""

import subprocess
import sys

import pytest

PROBE = """
import re
from pathlib import Path
from transformer.core.memory import release_free_memory
def anon():
    return int(re.search(r"RssAnon:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1)) * 1024
blocks = [bytes(2000) + bytes([i % 256]) for i in range(100_000)]  # ~200 MB of heap, not memory-mapped
last = blocks[-1]
del blocks
kept = anon()
print(release_free_memory(), kept, anon())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc or tcmalloc: Linux")
def test_freed_memory_goes_back_to_the_system_when_asked():
    asked, kept, after = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True
    ).stdout.split()
    assert asked == "True"
    assert int(kept) - int(after) > 100 * 2**20
