"""Dynamic batching without a model: who shares a search, the token cap, given-up jobs, errors."""

import signal
import threading
import time

import pytest

from transformer.cli.serve import serve
from transformer.serve.batcher import Batcher, Job, SharedLock

pytestmark = pytest.mark.serial  # its assertions time the batcher's waits: `make test` runs it alone


def recording_batcher(**kwargs) -> tuple[Batcher, list]:
    """A batcher whose 'search' upper-cases the sentences and records each batch's sentences and settings."""
    batches = []

    def decode(sentences: list[str], settings) -> list[str]:
        batches.append((list(sentences), settings))
        if "boom" in sentences:
            raise ValueError("boom")
        return [f"{s.upper()}/{settings}" for s in sentences]

    args = dict(max_batch_tokens=100, max_wait_ms=200.0)
    args.update(kwargs)
    return Batcher(decode, **args), batches


def job(sentences: list[str], key: str = "a") -> Job:
    return Job(sentences, n_tokens=sum(len(s) for s in sentences), key=key, settings=key)


def test_jobs_with_the_same_settings_share_a_search_and_get_their_own_results():
    batcher, batches = recording_batcher()
    jobs = [job(["x", "yy"]), job(["zzz"], "b"), job(["w"])]
    futures = [batcher.submit(j) for j in jobs]  # queued before the thread starts: all waiting at once
    batcher.start()
    try:
        results = [f.result(timeout=10) for f in futures]
    finally:
        batcher.stop()
    assert results[0][0] == ["X/a", "YY/a"] and results[1][0] == ["ZZZ/b"] and results[2][0] == ["W/a"]
    assert sorted(batches) == [(["x", "yy", "w"], "a"), (["zzz"], "b")]
    assert results[0][1] is results[2][1] and results[0][1].requests == 2 and results[0][1].sentences == 3
    assert results[1][1].requests == 1


def test_the_token_cap_splits_batches_and_batching_off_decodes_each_job_alone():
    for kwargs, expected in (({"max_batch_tokens": 5}, [2, 2]), ({"batching": False}, [1, 1, 1, 1])):
        batcher, batches = recording_batcher(**kwargs)
        futures = [batcher.submit(job([c * 2])) for c in "abcd"]  # 2 tokens each
        batcher.start()
        try:
            [f.result(timeout=10) for f in futures]
        finally:
            batcher.stop()
        sizes = [len(sentences) for sentences, _ in batches]
        assert sizes == expected


def test_a_lone_client_never_waits():
    batcher, _ = recording_batcher(max_wait_ms=1000.0)
    batcher.start()
    try:
        start = time.monotonic()
        for word in ("one", "two", "three"):
            batcher.submit(job([word])).result(timeout=10)
        assert time.monotonic() - start < 1.0  # no other traffic: no wait
    finally:
        batcher.stop()


def test_clients_answered_together_are_waited_for_until_as_many_are_back():
    batcher, _ = recording_batcher(max_wait_ms=1000.0)
    pair = [batcher.submit(job([w])) for w in ("x", "y")]  # concurrent traffic, queued before the thread starts
    batcher.start()
    try:
        assert pair[0].result(timeout=10)[1] is pair[1].result(timeout=10)[1]
        start = time.monotonic()
        first = batcher.submit(job(["a"]))
        time.sleep(0.1)  # the other client of the last batch comes back a little later
        second = batcher.submit(job(["b"]))
        assert first.result(timeout=10)[1] is second.result(timeout=10)[1]  # still one batch
        assert 0.1 <= time.monotonic() - start < 0.8  # started when both were back, not at max_wait
        start = time.monotonic()
        alone = batcher.submit(job(["c"]))  # only one of the two comes back: the wait runs out
        assert alone.result(timeout=10)[1].requests == 1
        assert 0.9 < time.monotonic() - start < 5
    finally:
        batcher.stop()


def test_a_batch_also_waits_for_the_clients_of_the_last_batch_when_others_came_during_its_search():
    searching = threading.Event()

    def decode(sentences: list[str], settings) -> list[str]:
        if "x" in sentences:
            assert searching.wait(timeout=10)
        return [s.upper() for s in sentences]

    batcher = Batcher(decode, max_batch_tokens=100, max_wait_ms=1000.0)
    pair = [batcher.submit(job([w])) for w in ("x", "y")]
    batcher.start()
    try:
        time.sleep(0.1)  # x and y are being searched
        came = batcher.submit(job(["z"]))
        searching.set()
        [f.result(timeout=10) for f in pair]
        start = time.monotonic()
        first = batcher.submit(job(["x2"]))
        time.sleep(0.1)  # x and y's clients come back one after the other
        second = batcher.submit(job(["y2"]))
        infos = [f.result(timeout=10)[1] for f in (came, first, second)]
        assert len({info.id for info in infos}) == 1 and infos[0].requests == 3  # not z and x2 without y2
        assert time.monotonic() - start < 0.8  # started when all three were there, not at max_wait
    finally:
        batcher.stop()


def test_a_given_up_job_is_not_decoded_and_an_error_reaches_only_its_batch():
    batcher, batches = recording_batcher(max_wait_ms=0.0)
    gone = batcher.submit(job(["gone"]))
    assert gone.cancel()  # the caller timed out or disconnected before its batch started
    failing = batcher.submit(job(["boom"], "c"))
    fine = batcher.submit(job(["ok"], "d"))
    batcher.start()
    try:
        with pytest.raises(ValueError, match="boom"):
            failing.result(timeout=10)
        assert fine.result(timeout=10)[0] == ["OK/d"]
    finally:
        batcher.stop()
    assert all("gone" not in sentences for sentences, _ in batches)


def test_exclusive_waits_for_shared_holders_and_keeps_them_out():
    lock, events = SharedLock(), []

    def reader():
        with lock.shared():
            events.append("shared in")
            time.sleep(0.2)
            events.append("shared out")

    thread = threading.Thread(target=reader)
    thread.start()
    time.sleep(0.05)
    with lock.exclusive():
        events.append("exclusive")
    thread.join()
    assert events == ["shared in", "shared out", "exclusive"]


class FakeServer:
    """The part of `uvicorn.Server` that `serve()` uses."""

    should_exit = force_exit = False

    def run(self) -> None:
        while not self.should_exit:
            time.sleep(0.01)


def test_serve_stops_on_a_signal_that_another_thread_received():
    """The kernel may hand SIGTERM to any thread; the main thread, waiting for work, must still run its handler."""
    batcher, _ = recording_batcher()
    returned = threading.Event()

    def signal_then_watch() -> None:
        time.sleep(0.3)  # serve() waits for work in the main thread
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # to this thread, not the main one
        if not returned.wait(timeout=5):
            batcher.stop()  # the main thread never noticed: unblock it so that the test fails instead of hanging

    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    threading.Thread(target=signal_then_watch).start()
    start = time.monotonic()
    try:
        serve(FakeServer(), batcher)
    finally:
        returned.set()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert time.monotonic() - start < 2
