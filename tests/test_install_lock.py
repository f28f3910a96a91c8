"""Two installs into one cache at once: one waits for the other (a lock on the cache).

Two real processes, each given the installer's fake pip (the ``run`` boundary of the
installer tests: no real build, no network). One is held inside its build by an event
until the other has either reached the lock or, before the lock, gone through it.
"""

from __future__ import annotations

import errno
import hashlib
import multiprocessing
import os
import sys
from collections.abc import Mapping, Sequence
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pytest
from test_evaluation import _fake_runtime_pin, _FakeRuntimePip

from veridic.evaluation import install


class _HeldPip(_FakeRuntimePip):
    """The fake pip, held on ``hold`` (after it sets ``inside``) when it runs ``verb``, and
    checking the wheel against its hash as pip's ``--require-hashes`` does."""

    def __init__(self, wheel: bytes, verb: str, inside: Event, hold: Event) -> None:
        super().__init__(_fake_runtime_pin(b"sdist"), b"sdist", wheel=wheel)
        self.verb, self.inside, self.hold = verb, inside, hold

    def __call__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        runtime_install = "install" in command and "--target" not in command
        if ("wheel" in command and self.verb == "wheel") or (
            runtime_install and self.verb == "install"
        ):
            self.inside.set()
            self.hold.wait()
        super().__call__(command, env)
        if runtime_install:
            url, _, hashes = self.calls[-1][2].splitlines()[0].partition(" ")
            wheel = Path(url2pathname(urlsplit(url).path))
            found = hashlib.sha256(wheel.read_bytes()).hexdigest()
            if hashes != f"--hash=sha256:{found}":
                raise install.InstallError(f"pip: {wheel.name} does not match {hashes}")


def _install(cache: str, wheel: bytes, verb: str, inside: Event, hold: Event, waits: Event) -> None:
    """One install, in a process of its own; ``waits`` is set when it waits for the lock."""

    def log(line: str) -> None:
        if "waiting for another install" in line:
            waits.set()

    fake = _HeldPip(wheel, verb, inside, hold)
    install.ensure_runtime(Path(cache), fake.pin, run=fake, log=log)


def _until(event: Event, *processes: BaseProcess) -> None:
    """Wait for ``event``; fail at once, rather than wait for ever, if a process has died."""
    while not event.wait(0.05):
        ended = [p.exitcode for p in processes if p.exitcode is not None]
        assert not ended, f"a process ended (exit status {ended}) before {event} was set"


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl: the fallback is tested below")
def test_two_installs_into_one_cache_never_pair_a_wheel_with_the_other_s_hash(
    tmp_path: Path,
) -> None:
    # The first is held inside its build (before it caches its wheel); the second, with
    # nothing cached yet, built its own wheel, cached it with its hash and was held in its
    # pip install, whose requirements named the wheel's path and the second's hash. The
    # first, released, cached its own wheel at that path, and the second's pip found the
    # first's wheel under the second's hash. Now the second waits for the first.
    spawn = multiprocessing.get_context("spawn")
    # Each event held here: one made in the arguments was collected, and its semaphore
    # gone, before the child unpickled it.
    first_inside, first_hold, first_waits = spawn.Event(), spawn.Event(), spawn.Event()
    second_got_there, second_hold = spawn.Event(), spawn.Event()
    cache = str(tmp_path / "cache")
    first = spawn.Process(
        target=_install,
        args=(cache, b"first wheel", "wheel", first_inside, first_hold, first_waits),
    )
    # The second's progress, either way: waiting for the lock, or held in its install.
    second = spawn.Process(
        target=_install,
        args=(cache, b"second wheel", "install", second_got_there, second_hold, second_got_there),
    )
    first.start()
    try:
        _until(first_inside, first)
        second.start()
        _until(second_got_there, first, second)
        first_hold.set()
        first.join()
        second_hold.set()
        second.join()
    finally:
        first_hold.set()
        second_hold.set()
        for process in (first, second):
            if process.pid is not None:
                process.join()
    assert not first_waits.is_set()
    assert (first.exitcode, second.exitcode) == (0, 0)
    [wheel] = (tmp_path / "cache" / "wheels").glob("*/*.whl")
    assert wheel.read_bytes() == b"first wheel"  # built once: the second took it from the cache
    assert install.recorded_sha256(wheel) == hashlib.sha256(b"first wheel").hexdigest()


def test_without_fcntl_a_second_install_into_a_cache_is_refused_naming_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A platform without fcntl (Windows) gets the lock file: a second install is refused
    # at once, with the file named, rather than racing the first.
    monkeypatch.setattr(install, "_fcntl", lambda: None)
    refusals: list[str] = []

    class _SecondInstallInside(_FakeRuntimePip):
        def __call__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
            if "wheel" in command:  # another install starts while this one builds
                with pytest.raises(install.InstallError) as refused:
                    install.build_runtime(tmp_path, self.pin, run=self, log=print, cpuinfo="")
                refusals.append(str(refused.value))
            super().__call__(command, env)

    fake = _SecondInstallInside(_fake_runtime_pin(b"sdist"), b"sdist")
    wheel = install.build_runtime(tmp_path, fake.pin, run=fake, log=print, cpuinfo="")
    [refusal] = refusals
    assert str(tmp_path / ".install-lock") in refusal
    assert "another install" in refusal
    assert not (tmp_path / ".install-lock").exists()  # removed when the first one ended
    assert install.build_runtime(tmp_path, fake.pin, run=fake, log=print, cpuinfo="") == wheel


class _InterruptedPip(_FakeRuntimePip):
    """The fake pip, interrupted (Ctrl-C) while it builds: inside the cache's lock."""

    def __call__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        if "wheel" in command:
            raise KeyboardInterrupt
        super().__call__(command, env)


@pytest.mark.parametrize("fcntl", ["flock", "lock file"])
def test_an_install_interrupted_inside_the_lock_leaves_the_cache_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fcntl: str
) -> None:
    # Ctrl-C in the build: the next install neither waits for nor is refused by the lock.
    if fcntl == "lock file":
        monkeypatch.setattr(install, "_fcntl", lambda: None)
    elif sys.platform == "win32":
        pytest.skip("fcntl")
    said: list[str] = []
    interrupted = _InterruptedPip(_fake_runtime_pin(b"sdist"), b"sdist")
    with pytest.raises(KeyboardInterrupt):
        install.build_runtime(
            tmp_path, interrupted.pin, run=interrupted, log=said.append, cpuinfo=""
        )
    assert not (tmp_path / ".install-lock").exists()
    fake = _FakeRuntimePip(_fake_runtime_pin(b"sdist"), b"sdist")
    install.build_runtime(tmp_path, fake.pin, run=fake, log=said.append, cpuinfo="")
    assert not [line for line in said if "waiting for another install" in line]


def test_a_lock_file_left_by_a_killed_install_is_named_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process killed while it held the lock file (no finally ran) leaves it: the next
    # install is refused, and the message says it may be stale and how to clear it.
    monkeypatch.setattr(install, "_fcntl", lambda: None)
    (tmp_path / ".install-lock").write_text("4242\n")
    fake = _FakeRuntimePip(_fake_runtime_pin(b"sdist"), b"sdist")
    with pytest.raises(install.InstallError) as refused:
        install.build_runtime(tmp_path, fake.pin, run=fake, log=print, cpuinfo="")
    message = str(refused.value)
    assert f"delete {tmp_path / '.install-lock'}" in message
    assert "stopped before it removed it" in message
    assert not fake.calls  # nothing was built beside the other install
    (tmp_path / ".install-lock").unlink()  # as the message says, once none runs
    install.build_runtime(tmp_path, fake.pin, run=fake, log=print, cpuinfo="")


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl")
@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EBADF], ids=["ENOLCK", "EBADF"])
def test_a_cache_whose_filesystem_cannot_flock_takes_the_lock_file_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # NFS without a lock manager (ENOLCK), or one that maps flock to a write lock, which a
    # folder opened read-only cannot take (EBADF): no real NFS here, so flock says it.
    import fcntl

    def unlockable(fd: int, operation: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", unlockable)
    said: list[str] = []
    refusals: list[str] = []

    class _SecondInstallInside(_FakeRuntimePip):
        def __call__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
            if "wheel" in command:  # another install starts while this one builds
                with pytest.raises(install.InstallError) as refused:
                    install.build_runtime(tmp_path, self.pin, run=self, log=print, cpuinfo="")
                refusals.append(str(refused.value))
            super().__call__(command, env)

    fake = _SecondInstallInside(_fake_runtime_pin(b"sdist"), b"sdist")
    install.build_runtime(tmp_path, fake.pin, run=fake, log=said.append, cpuinfo="")
    [note] = [line for line in said if "cannot lock" in line]
    assert str(tmp_path) in note
    assert os.strerror(code) in note
    assert str(tmp_path / ".install-lock") in note  # what it does instead
    assert "VERIDIC_EVAL_CACHE" in note  # and what to do for installs that wait
    [refusal] = refusals
    assert str(tmp_path / ".install-lock") in refusal
    assert not (tmp_path / ".install-lock").exists()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_a_lock_file_that_cannot_be_written_is_closed_removed_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk: the lock file is made, and writing the pid into it fails.
    monkeypatch.setattr(install, "_fcntl", lambda: None)
    lock = tmp_path / ".install-lock"
    written_to: list[int] = []
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        if data == f"{os.getpid()}\n".encode():
            written_to.append(fd)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_disk)
    fake = _FakeRuntimePip(_fake_runtime_pin(b"sdist"), b"sdist")
    with pytest.raises(install.InstallError) as refused:
        install.build_runtime(tmp_path, fake.pin, run=fake, log=print, cpuinfo="")
    monkeypatch.undo()
    [fd] = written_to
    try:
        still_open = os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        still_open = ""
    assert not still_open.startswith(str(lock))  # closed (the number may be reused)
    assert not lock.exists()
    message = str(refused.value)
    assert str(lock) in message
    assert os.strerror(errno.ENOSPC) in message
    assert "VERIDIC_EVAL_CACHE" in message
    assert not fake.calls


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC], ids=["EROFS", "ENOSPC"])
def test_a_lock_file_that_cannot_be_made_is_named_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    # The lock file's folder is read-only (an NFS export mounted so: the fallback's own
    # case) or its disk is full: making the file fails before anything is written.
    monkeypatch.setattr(install, "_fcntl", lambda: None)
    lock = tmp_path / ".install-lock"
    real_open = os.open

    def unmakeable(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        if Path(path) == lock:
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", unmakeable)
    fake = _FakeRuntimePip(_fake_runtime_pin(b"sdist"), b"sdist")
    with pytest.raises(install.InstallError) as refused:
        install.build_runtime(tmp_path, fake.pin, run=fake, log=print, cpuinfo="")
    monkeypatch.undo()
    message = str(refused.value)
    assert str(lock) in message
    assert os.strerror(code) in message
    assert "VERIDIC_EVAL_CACHE" in message
    assert not lock.exists()
    assert not fake.calls
