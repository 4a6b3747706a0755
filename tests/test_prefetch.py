"""`prefetch.ahead`: the items in order, the next one made in another thread while the caller holds the last, and an
error raised in the caller's thread where its item would have come."""

import threading

import pytest

from transformer.prefetch import ahead


def test_items_come_in_order_and_all_of_them():
    assert list(ahead(range(1000))) == list(range(1000))
    assert list(ahead([])) == []


def test_the_next_item_is_made_in_another_thread_while_the_caller_holds_the_last():
    made_second, makers = threading.Event(), []

    def items():
        for i in range(3):
            makers.append(threading.current_thread())
            if i == 1:
                made_second.set()
            yield i

    stream = ahead(items())
    assert next(stream) == 0
    assert made_second.wait(timeout=10)  # item 1 is ready before the caller asks for it
    assert list(stream) == [1, 2]
    assert threading.main_thread() not in makers


def test_an_error_comes_in_its_items_place_in_the_callers_thread():
    def items():
        yield 0
        yield 1
        raise ValueError("line 3 cannot be read")

    stream = ahead(items())
    assert [next(stream), next(stream)] == [0, 1]
    with pytest.raises(ValueError, match="line 3"):
        next(stream)


def test_a_caller_that_stops_early_leaves_no_thread_behind():
    before = threading.active_count()
    stream = ahead(iter(range(10)))
    assert next(stream) == 0
    stream.close()
    assert threading.active_count() == before
