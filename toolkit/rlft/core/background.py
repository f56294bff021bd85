"""Produce the next items of an iterator in a background thread while the caller consumes the current one.

Used where a consumer spends its time in C code that releases the GIL (a Parquet write) and the producer in
numpy / Arrow kernels (building the next chunk of records): on a 2-core machine the two then overlap. Items
come out in order; an exception raised by the producer is raised in the consumer; a consumer that stops early
(an error of its own, Ctrl-C) stops the producer before returning.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

_END = object()
_POLL_S = 0.05  # how often a producer blocked on a full queue checks whether the consumer has gone


class _Producer(threading.Thread):
    """Iterates ``items`` into a bounded queue until they end, fail, or the consumer sets ``stop``."""

    def __init__(self, items: Iterable, depth: int):
        super().__init__(name="rlft-prefetch", daemon=True)
        self.items, self.ready, self.stop = items, queue.Queue(maxsize=depth), threading.Event()

    def put(self, entry) -> bool:
        """Queue ``entry``; False when the consumer went away first."""
        while not self.stop.is_set():
            try:
                self.ready.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        try:
            for item in self.items:
                if not self.put((item, None)):
                    return
            self.put((_END, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which raises it
            self.put((_END, exc))


def prefetch(items: Iterable[T], depth: int = 1) -> Iterator[T]:
    """Yield ``items`` in order, computing up to ``depth`` of them ahead in a daemon thread."""
    producer = _Producer(items, depth)
    producer.start()
    try:
        while True:
            item, error = producer.ready.get()
            if item is _END:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        producer.stop.set()
        producer.join()
