"""Handing freed memory back to the system. An allocator keeps what a process frees for its next requests, so after
a stage that peaks and ends (SentencePiece's training) the process keeps that peak as its own until told to let go."""

import ctypes

# Each allocator's call that returns its free pages: tcmalloc's when it is preloaded (as `make train` does), else
# glibc's; neither is there elsewhere (macOS), and nothing is done.
RELEASES = (("MallocExtension_ReleaseFreeMemory", ()), ("malloc_trim", (0,)))


def release_free_memory() -> bool:
    """Ask the allocator in use to give its free pages back to the system; whether one could be asked."""
    process = ctypes.CDLL(None)
    for name, args in RELEASES:
        call = getattr(process, name, None)
        if call is not None:
            call(*args)
            return True
    return False
