"""prefetch: items in order, producer errors raised in the consumer, an early stop ends the producer."""

from __future__ import annotations

import threading

import pytest

from rlft.core.background import prefetch


def test_items_come_out_in_order_and_complete():
    assert list(prefetch(iter(range(100)), depth=3)) == list(range(100))
    assert list(prefetch([])) == []


def test_the_producer_runs_in_another_thread():
    names = list(prefetch(threading.current_thread().name for _ in range(3)))
    assert names == ["rlft-prefetch"] * 3


def test_a_producer_error_is_raised_in_the_consumer_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise ValueError("damaged chunk 3")

    seen = []
    with pytest.raises(ValueError, match="damaged chunk 3"):
        for item in prefetch(items()):
            seen.append(item)
    assert seen == [1, 2]


def test_a_consumer_that_stops_early_stops_the_producer():
    produced = []

    def items():
        for i in range(1_000):
            produced.append(i)
            yield i

    stream = prefetch(items(), depth=1)
    assert next(stream) == 0
    stream.close()  # what a consumer's error or Ctrl-C does to the generator
    assert not any(t.name == "rlft-prefetch" for t in threading.enumerate())
    assert len(produced) <= 3  # at most the item consumed, one queued and one waiting to be queued
