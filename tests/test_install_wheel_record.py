"""The cached runtime wheel: never without its recorded sha256, and named so pip reads it whole.

Through the installer's ``run`` boundary (the fake pip of the installer tests): no real
build, no network. The line that names the wheel is also given to the real pip, offline.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

import pytest
from test_evaluation import _fake_runtime_pin, _FakeRuntimePip

from veridic.evaluation import install

_COMMENT = re.compile(r"(^|\s+)#.*$")
"""What pip drops from a requirements line as a comment: a ``#`` at the start of the
line or after whitespace, and all that follows it."""


def _build(cache: Path, fake: _FakeRuntimePip) -> Path:
    return install.build_runtime(cache, fake.pin, run=fake, log=lambda _: None, cpuinfo="")


def test_a_build_that_fails_to_record_its_wheel_leaves_no_unrecorded_wheel(
    tmp_path: Path,
) -> None:
    # The wheel was moved into the cache and only then its sha256 written: a crash or a
    # failed write between the two left a wheel without a record, which the next run
    # took for one cached by an older veridic. Here the record cannot be written (a
    # folder stands at its path).
    fake = _FakeRuntimePip(_fake_runtime_pin(b"sdist"), b"sdist")
    wheel = _build(tmp_path, fake)
    for path in wheel.parent.iterdir():
        path.unlink()
    wheel.with_name(wheel.name + ".sha256").mkdir()
    with pytest.raises(OSError):  # noqa: PT011  # the OS's own error, naming the path
        _build(tmp_path, fake)
    assert list(wheel.parent.glob("*.whl")) == []


def test_a_rebuild_after_a_failed_record_is_recorded_and_reused(tmp_path: Path) -> None:
    fake = _FakeRuntimePip(_fake_runtime_pin(b"sdist"), b"sdist")
    wheel = _build(tmp_path, fake)
    for path in wheel.parent.iterdir():
        path.unlink()
    record = wheel.with_name(wheel.name + ".sha256")
    record.mkdir()
    with pytest.raises(OSError):  # noqa: PT011  # the OS's own error, naming the path
        _build(tmp_path, fake)
    record.rmdir()
    again = _build(tmp_path, fake)
    assert install.recorded_sha256(again) is not None
    assert _build(tmp_path, fake) == again
    assert len(fake.commands("wheel")) == 3
    assert sorted(path.name for path in again.parent.iterdir()) == [
        again.name,
        record.name,
    ]  # no partial file left behind


@pytest.mark.parametrize("folder", ["eval #1", "eval#2 cache", "my cache", "50%"])
def test_the_wheel_is_installed_from_a_cache_whose_path_pip_would_cut(
    tmp_path: Path, folder: str
) -> None:
    # The wheel's path was written into the requirements file as is: in a cache at
    # ".../eval #1/..." pip read " #1/..." and the rest of the line as a comment, and
    # installed nothing it could find (or lost the hash). It goes as a file:// URL now.
    cache = tmp_path / folder
    fake = _FakeRuntimePip(_fake_runtime_pin(b"sdist"), b"sdist")
    install.ensure_runtime(cache, fake.pin, run=fake, log=lambda _: None)
    [(_, _, requirements)] = [
        call for call in fake.commands("install") if "--target" not in call[0]
    ]
    wheel_line = requirements.splitlines()[0]
    read = _COMMENT.sub("", wheel_line)
    assert read == wheel_line
    location, _, hashes = read.partition(" ")
    assert location.startswith("file:///")
    wheel = Path(url2pathname(urlsplit(location).path))
    assert wheel.is_file()
    assert wheel.is_relative_to(cache.resolve())
    assert hashes == f"--hash=sha256:{install.recorded_sha256(wheel)}"


class _TinyWheelPip(_FakeRuntimePip):
    """The fake pip, but ``pip wheel`` leaves a real wheel (pure Python, a few bytes) that
    the real pip can read, holding ``mark`` so that no other file has its hash."""

    def __init__(self, mark: str) -> None:
        super().__init__(_fake_runtime_pin(b"sdist"), b"sdist")
        self.mark = mark

    def __call__(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        super().__call__(command, env)
        if "wheel" in command:
            folder = Path(command[command.index("-w") + 1])
            for fake in folder.glob("*.whl"):
                fake.unlink()
            _tiny_wheel(folder / "fake_runtime-1.0-py3-none-any.whl", self.mark)


def _tiny_wheel(path: Path, mark: str) -> None:
    files = {
        "fake_runtime/__init__.py": f"MARK = {mark!r}\n".encode(),
        "fake_runtime-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: fake-runtime\n"
        b"Version: 1.0\n",
        "fake_runtime-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip('=')},{len(data)}"
        for name, data in files.items()
    ]
    files["fake_runtime-1.0.dist-info/RECORD"] = "\n".join(
        [*record, "fake_runtime-1.0.dist-info/RECORD,,", ""]
    ).encode()
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)


@pytest.mark.parametrize("folder", ["eval #1", "50% done", "100%25", "ünï cødé ☃", "${HOME}"])
def test_the_real_pip_finds_the_wheel_by_its_line_in_a_cache_of_any_name(
    tmp_path: Path, folder: str
) -> None:
    """The wheel's line of the install's requirements, given to pip itself (offline, a dry
    run): it names the cached wheel, whose recorded hash pip checks, whatever the cache
    folder's name holds (a `` #``, a ``%``, an escape, letters beyond ASCII, a ``${...}``
    pip would expand)."""
    cache = tmp_path / folder
    fake = _TinyWheelPip(folder)
    install.ensure_runtime(cache, fake.pin, run=fake, log=lambda _: None)
    [(_, _, requirements)] = [
        call for call in fake.commands("install") if "--target" not in call[0]
    ]
    wheel_only = tmp_path / "wheel-only.txt"
    wheel_only.write_text(requirements.splitlines()[0] + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    done = subprocess.run(  # this interpreter's pip, offline
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps",
         "--require-hashes", "--quiet", "--report", str(report), "-r", str(wheel_only)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [planned] = json.loads(report.read_text(encoding="utf-8"))["install"]
    assert planned["metadata"]["name"] == "fake-runtime"
    wheel = Path(url2pathname(urlsplit(planned["download_info"]["url"]).path))
    assert wheel.is_relative_to(cache.resolve())
    assert install.recorded_sha256(wheel) == hashlib.sha256(wheel.read_bytes()).hexdigest()
