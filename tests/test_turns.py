"""The lock the SQLite store's writers take in turns: exclusive, and it hands over when due."""

from __future__ import annotations

import signal
import sys
import threading
import time
from types import FrameType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veridic.run._turns import Turns


@given(threads=st.integers(2, 8), each=st.integers(1, 200), patience=st.sampled_from([0.0, 1e-4]))
@settings(max_examples=15, deadline=None)
def test_one_holder_at_a_time_and_every_taker_gets_its_turns(
    threads: int, each: int, patience: float
) -> None:
    turns = Turns(patience)
    inside = 0
    overlaps = 0
    taken = [0] * threads
    start = threading.Barrier(threads)

    def taker(n: int) -> None:
        nonlocal inside, overlaps
        start.wait()
        for _ in range(each):
            with turns:
                inside += 1
                if inside != 1:
                    overlaps += 1
                time.sleep(0)  # let another thread run while the lock is held
                inside -= 1
                taken[n] += 1

    workers = [threading.Thread(target=taker, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert overlaps == 0
    assert taken == [each] * threads
    turns.acquire()  # free again, and nobody left waiting
    turns.release()


def test_a_due_waiter_gets_the_lock_at_the_next_release_not_the_holders_next_take() -> None:
    # threading.Lock lets a thread that releases and takes again at once keep it for
    # thousands of turns while a woken waiter waits for the GIL; Turns hands it over.
    turns = Turns(patience=0.0)  # every waiter is due at once
    holder_turns = 0
    waiter_in = threading.Event()
    queued = threading.Event()
    stop = threading.Event()
    seen_by_waiter: list[int] = []

    def holder() -> None:
        nonlocal holder_turns
        while not stop.is_set():
            with turns:
                holder_turns += 1
                if queued.is_set() and not waiter_in.is_set():
                    seen_by_waiter.append(holder_turns)

    def waiter() -> None:
        turns.acquire()
        waiter_in.set()
        turns.release()

    first = threading.Thread(target=holder)
    turns.acquire()  # hold it so that the waiter queues before the holder loops
    first.start()
    second = threading.Thread(target=waiter)
    second.start()
    while not turns._due:
        time.sleep(0.001)
    queued.set()
    turns.release()
    assert waiter_in.wait(10)
    stop.set()
    first.join()
    second.join()
    # The holder thread may have taken it once between our release and the hand-over
    # (it was waiting too, and was queued first, or took it free), never again after.
    assert len(seen_by_waiter) <= 1


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_waiter_interrupted_in_the_queue_leaves_it_and_the_lock_stays_usable() -> None:
    turns = Turns(patience=0.0)
    holding = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with turns:
            holding.set()
            release.wait(10)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    other = threading.Thread(target=holder)
    other.start()
    assert holding.wait(10)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(KeyboardInterrupt):
            turns.acquire()  # queued behind the holder, then interrupted
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not turns._due  # it left the queue
    release.set()
    other.join()
    done = threading.Event()

    def take_and_give_back() -> None:
        with turns:
            done.set()

    later = threading.Thread(target=take_and_give_back)
    later.start()
    later.join(10)
    assert done.is_set()  # the release went to nobody stale: the lock is free


def _interrupted_at(turns: Turns, at: int) -> tuple[bool, int]:
    """Take ``turns`` in this thread with a ``KeyboardInterrupt`` raised as the ``at``-th call
    of C code that ``Turns.acquire`` makes returns (none for 0); whether the lock was taken,
    and how many such calls returned.

    That is where CPython runs a signal handler (it checks for signals as each call
    returns), so the profile function raises it exactly where Ctrl-C could land, at a
    point no test could hit by timing a signal. Once this thread is queued, the holder
    lets the lock go.
    """
    code = Turns.acquire.__code__
    returned = 0
    queued = threading.Event()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal returned
        if frame.f_code is code and event == "c_return":
            returned += 1
            if turns._due:
                queued.set()
            if returned == at:
                raise KeyboardInterrupt

    holding, go = threading.Event(), threading.Event()

    def holder() -> None:
        with turns:
            holding.set()
            go.wait()

    other = threading.Thread(target=holder)
    other.start()
    assert holding.wait(10)

    def release_once_queued() -> None:
        queued.wait()
        go.set()

    releaser = threading.Thread(target=release_once_queued, daemon=True)
    releaser.start()
    sys.setprofile(profile)
    try:
        turns.acquire()
        taken = True
    except KeyboardInterrupt:
        taken = False
    finally:
        sys.setprofile(None)
        go.set()
        queued.set()
    other.join(10)
    return taken, returned


def test_an_interrupt_wherever_it_lands_in_a_queued_take_leaves_the_lock_usable() -> None:
    # The holder keeps the lock until this thread queues, so every step of the slow road
    # (wait, queue, be handed the lock) is one an interrupt can land after. One landing
    # after the queueing, before the wait, left a stale waiter that the holder handed the
    # lock to: nobody could take it again. Every C call of the road is tried, counted on
    # this Python (a fixed range tried positions that do not exist and passed for nothing).
    plain = Turns(patience=0.0)
    taken, calls = _interrupted_at(plain, 0)
    assert taken
    plain.release()
    assert calls >= 3  # waiting, queueing and being handed the lock each make a C call
    for at in range(1, calls + 1):
        turns = Turns(patience=0.0)
        taken, _ = _interrupted_at(turns, at)
        assert not taken, f"no interrupt landed at C call {at} of {calls}"
        assert not turns._due, at  # nobody stale left in the queue to hand the lock to
        done = threading.Event()

        def take_and_give_back(turns: Turns = turns, done: threading.Event = done) -> None:
            with turns:
                done.set()

        later = threading.Thread(target=take_and_give_back, daemon=True)
        later.start()
        later.join(10)
        assert done.is_set(), at  # free: not held by a waiter that left, nor by the guard


def _interrupted_as_taken(turns: Turns, *, held: bool) -> None:
    """Take ``turns`` in this thread with a ``KeyboardInterrupt`` raised as the first call of
    C code in ``Turns.acquire`` returns after this thread took the lock.

    That is where an interrupt that came while the thread waited for the lock is raised:
    Python runs a signal handler as a call returns, and ``_thread.interrupt_main()``, or a
    signal the OS gave another thread, does not cut the wait short. With ``held``, another
    thread holds the lock until this one has begun to take it.
    """
    code = Turns.acquire.__code__
    released = threading.Event()
    began = threading.Event()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if frame.f_code is not code:
            return
        if event == "c_call":
            began.set()
        elif event == "c_return" and released.is_set() and turns._lock.locked():
            released.clear()  # once
            raise KeyboardInterrupt

    def holder() -> None:
        with turns:
            holding.set()
            began.wait(10)
        released.set()

    holding = threading.Event()
    other = threading.Thread(target=holder)
    if held:
        other.start()
        assert holding.wait(10)
    else:
        released.set()
    sys.setprofile(profile)
    try:
        with pytest.raises(KeyboardInterrupt):
            turns.acquire()
    finally:
        sys.setprofile(None)
        began.set()
    if held:
        other.join(10)


@pytest.mark.parametrize("held", [False, True], ids=["free", "waited-for"])
def test_an_interrupt_right_after_the_lock_was_taken_gives_it_back(held: bool) -> None:
    # The interrupted take raised, so its caller never releases: the lock must not stay
    # taken. It did, whether it was free or came free while this thread waited in its
    # patience, and every later writer of the store waited for ever.
    turns = Turns(patience=10.0)
    _interrupted_as_taken(turns, held=held)
    assert not turns._due
    done = threading.Event()

    def take_and_give_back() -> None:
        with turns:
            done.set()

    later = threading.Thread(target=take_and_give_back, daemon=True)
    later.start()
    later.join(10)
    assert done.is_set()
