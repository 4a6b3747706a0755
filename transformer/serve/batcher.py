"""Dynamic batching: requests that arrive close together with the same settings share one search.

The decoding loops (`run()` in the main thread, or threads of their own) take the oldest waiting job, wait up to
`max_wait_s` for more jobs with the same key when traffic is concurrent, but only until the clients of the loop's
last batch are back beside those that came during its search (see `Batcher._take`), and decode the jobs of that
key in arrival order up to `max_batch_tokens` source tokens (the first job always goes, whatever its size). A job
whose caller gave up (timeout, disconnect) before its batch started is dropped unseen.
"""

import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
IDLE_WAKE_S = 0.25  # an idle decoding loop wakes this often (see `Batcher._take`)


@dataclass
class Job:
    """One request's sentences; jobs with equal keys may be decoded in one search with `settings`."""

    sentences: list[str]
    n_tokens: int
    key: Hashable
    settings: object
    future: Future = field(default_factory=Future)
    arrived: float = field(default_factory=time.monotonic)


@dataclass
class BatchInfo:
    """What a job's batch was: its number, size and decoding time."""

    id: int
    requests: int
    sentences: int
    decode_ms: float


class SharedLock:
    """Many holders of `shared()` at once, or one of `exclusive()` alone (a readers-writer lock)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._writing and self._readers == 0)
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


class ShuttingDown(RuntimeError):
    """The batcher is stopping: no new job, and those waiting fail with this."""


class QueueFull(Exception):
    """`submit` refused a job: `max_waiting` jobs are waiting already."""


class Batcher:
    """Decoding threads fed by `submit`; `decode(sentences, settings)` returns one result per sentence."""

    def __init__(
        self,
        decode: Callable[[list[str], object], list],
        max_batch_tokens: int,
        max_wait_ms: float,
        batching: bool = True,
        workers: int = 1,
        max_waiting: int = 128,
    ):
        self.decode, self.max_batch_tokens, self.batching = decode, max_batch_tokens, batching
        self.max_waiting = max_waiting
        self.max_wait_s = max_wait_ms / 1000
        self.model_lock = SharedLock()  # searches share the model; `exclusive()` runs a pass alone (/attention's)
        self._pending: list[Job] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._ids = itertools.count(1)
        self._threads = [threading.Thread(target=self._work, name=f"decode-{i}", daemon=True) for i in range(workers)]

    def start(self) -> None:
        """Decode in `workers` threads of their own."""
        for thread in self._threads:
            thread.start()

    def run(self) -> None:
        """Decode in the calling thread, and in `workers` - 1 threads of their own, until `stop()`.

        Call it from the main thread: an OpenMP region that torch opens from any other thread costs tens of µs instead
        of a few, which makes a search up to 2× slower (docs/serving.md).
        """
        for thread in self._threads[1:]:
            thread.start()
        self._work()

    def stop(self) -> None:
        """Finish the batch in progress, fail the waiting jobs, end the threads."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            if thread.ident is not None:  # started
                thread.join(timeout=60)
        for job in self._pending:
            if job.future.set_running_or_notify_cancel():
                job.future.set_exception(ShuttingDown("the server is shutting down"))

    def submit(self, job: Job) -> Future:
        """Queue `job`; its future gives (one result per sentence, BatchInfo). Raises `QueueFull` when
        `max_waiting` jobs wait already."""
        with self._cond:
            if self._stopping:
                raise ShuttingDown("the server is shutting down")
            if len(self._pending) >= self.max_waiting:
                raise QueueFull(f"{len(self._pending)} requests are waiting already")
            self._pending.append(job)
            self._cond.notify_all()
        return job.future

    def waiting(self) -> int:
        with self._cond:
            return len(self._pending)

    def _batch_of(self, first: Job) -> list[Job]:
        """`first` and the waiting jobs with its key that fit in `max_batch_tokens` after it, oldest first."""
        batch, tokens = [first], first.n_tokens
        if not self.batching:
            return batch
        for job in self._pending[1:]:
            if job.key == first.key and tokens + job.n_tokens <= self.max_batch_tokens:
                batch.append(job)
                tokens += job.n_tokens
        return batch

    def _take(self, free_since: float, expect: int) -> list[Job] | None:
        """The next batch of live jobs.

        Under concurrent traffic (`expect` > 1, or several jobs are waiting) the batch waits until `max_wait_s`
        after the later of its oldest job's arrival and the thread becoming free, so the clients answered together
        by the last batch can come back; it starts as soon as `expect` jobs are in it (the last batch's, back, and
        those that came during its search), and a lone client never waits.
        """
        with self._cond:
            while True:
                if self._stopping:
                    return None
                if not self._pending:
                    # Not forever: a signal (SIGTERM) that the kernel gives another thread is handled in Python only
                    # when the main thread runs again, and the main thread may be this one (`run()`).
                    self._cond.wait(timeout=IDLE_WAKE_S)
                    continue
                first = self._pending[0]
                batch = self._batch_of(first)
                left = max(first.arrived, free_since) + self.max_wait_s - time.monotonic()
                full = sum(job.n_tokens for job in batch) >= self.max_batch_tokens
                back = len(batch) >= max(expect, 2)  # the clients we know of are all here
                waits = self.batching and (expect > 1 or len(self._pending) > 1)
                if waits and left > 0 and not (full or back):
                    self._cond.wait(timeout=left)  # others may still come
                    continue
                for job in batch:
                    self._pending.remove(job)
                live = [job for job in batch if job.future.set_running_or_notify_cancel()]
                if live:
                    return live

    def _work(self) -> None:
        free_since, expect = time.monotonic(), 1
        while (batch := self._take(free_since, expect)) is not None:
            came = self._decode(batch)
            free_since = time.monotonic()
            expect = len(batch) + came  # the batch's clients will come back to join those that came meanwhile

    def _decode(self, batch: list[Job]) -> int:
        """One search over the batch's sentences; each job gets its own results, or the search's error.

        Returns how many jobs with the batch's settings came during the search.
        """
        sentences = [s for job in batch for s in job.sentences]
        start = time.perf_counter()
        try:
            with self.model_lock.shared():
                results = self.decode(sentences, batch[0].settings)
        except Exception as err:  # noqa: BLE001 - the callers get the error, the thread goes on
            log.exception("batch of %d sentences failed", len(sentences))
            for job in batch:
                job.future.set_exception(err)
            return 0
        with self._cond:
            came = sum(job.key == batch[0].key for job in self._pending)
        info = BatchInfo(next(self._ids), len(batch), len(sentences), 1000 * (time.perf_counter() - start))
        offset = 0
        for job in batch:
            job.future.set_result((results[offset : offset + len(job.sentences)], info))
            offset += len(job.sentences)
        return came
