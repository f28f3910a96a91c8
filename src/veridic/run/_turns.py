"""A lock whose holder may take it again at once, but never keeps a waiter past a deadline.

Why not ``threading.Lock``: it is unfair. A thread that releases it and asks again
at once gets it back before the woken waiter runs (the waiter must first get the
GIL), so with 16 threads writing to one SQLite connection behind such a lock one
writer waited more than a second (``benchmarks/audit.py``, the longest single
write) while the others wrote. Why not a strict queue: handing the lock to the
next thread on every release costs a thread switch per write, which on two cores
cost a third of the records a second.

:class:`Turns` does both: it lets the holder take it again, as ``Lock`` does, until
a waiter has waited ``patience`` seconds; from then on each release hands the lock
to the longest waiting of those, in the order they began to wait. So no thread
waits much longer than ``patience`` plus the turns of those queued before it,
and threads switch only when someone has waited that long. With the lock free
or barely contended it costs what ``Lock`` costs.

The default patience was chosen by measurement (SQLite writes from 4 and 16
threads on two cores, against one connection behind a ``threading.Lock``): 2 ms
gave 0.6-0.8x its records a second with the longest write 6 ms; 10 ms, 0.8-0.9x
and 15 ms; 30 ms, 0.85-1.0x and 35 ms; 50 ms, 1.0x and 55 ms; the plain lock's
longest write was 0.3-1.3 s.

>>> turns = Turns(patience=0.002)
>>> with turns:
...     pass
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Final

__all__ = ["PATIENCE", "Turns"]

PATIENCE: Final = 0.03
"""Seconds a writer waits like any other before it is handed the lock in its turn."""

_AT_ONCE: Final = (False,)
_WAITING: Final = (True,)
"""``Lock.acquire``'s ``blocking`` argument, as ``map`` passes it."""


class Turns:
    """A lock that is handed, in order, to threads that waited ``patience`` seconds."""

    __slots__ = ("_due", "_guard", "_lock", "_patience")

    def __init__(self, patience: float = PATIENCE) -> None:
        self._lock = threading.Lock()  # held by whoever has the turn
        self._due: deque[_Waiter] = deque()  # waiters past their patience, in order
        self._guard = threading.Lock()  # makes "hand over or release" and "queue or take" atomic
        self._patience = patience

    def acquire(self) -> None:
        """Take the lock: at once if it is free and nobody is due, else in turn.

        An interrupt (``KeyboardInterrupt`` in the main thread) that lands while this
        thread takes, queues or waits leaves the queue, or passes on a lock it took or was
        handed meanwhile, wherever it lands. Python raises it as a call returns, so one
        that came during a wait lands right after the lock was taken: each take is
        answered into ``took`` by C code (``map``) before Python can raise, and the
        queueing is inside the ``try`` that undoes it. Left are the few steps of
        :meth:`release` before it hands the lock on or lets it go, as in every lock
        whose release is written in Python: an interrupt there keeps the lock taken.
        """
        took: list[bool] = []  # each take's answer, written before an interrupt can land
        mine: _Waiter | None = None
        try:
            if not self._due:
                took.extend(map(self._lock.acquire, _AT_ONCE))
                if took[-1]:
                    return
            took.extend(map(self._lock.acquire, _WAITING, (self._patience,)))
            if took[-1]:
                return
            mine = _Waiter()
            with self._guard:
                took.extend(map(self._lock.acquire, _AT_ONCE))
                if took[-1]:
                    return
                self._due.append(mine)
            mine.turn.acquire()  # released by the holder that hands the lock over: ours now
        except BaseException:
            with self._guard:
                if mine is not None and mine in self._due:  # not handed over yet: leave the queue
                    self._due.remove(mine)
                ours = True in took or (mine is not None and mine.handed)
            if ours:  # taken or handed over meanwhile: pass it on, since nobody will use it
                self.release()
            raise

    def release(self, *exc: object) -> None:
        """Hand the lock to the longest waiting due thread, or let it go."""
        with self._guard:
            if self._due:
                waiter = self._due.popleft()
                waiter.handed = True
                waiter.turn.release()
            else:
                self._lock.release()

    # The methods themselves, not wrappers that call them: every write takes and
    # gives back the lock, and this saves it a Python call each way.
    __enter__ = acquire
    __exit__ = release


class _Waiter:
    """A thread queued for the lock: ``turn`` is released, and ``handed`` set, when the
    lock is handed to it (both under the guard), so a waiter that an interrupt stopped
    knows whether it holds the lock, wherever the interrupt landed."""

    __slots__ = ("handed", "turn")

    def __init__(self) -> None:
        self.turn = threading.Lock()
        self.turn.acquire()
        self.handed = False
