"""The wheel a user installs from PyPI: built from the checkout's files, installed alone.

The files git knows (tracked, or new and not ignored; ``git ls-files``) are
copied to a temporary folder and the wheel is built there with ``pip wheel``,
so what lies around the checkout (``*.egg-info``, ``build/``, ``__pycache__``,
``.venv``) cannot leak in. The wheel must hold the package, ``py.typed``, the
SDK stubs as package data and the ``veridic`` command, and nothing else. It is
then installed into a fresh venv with nothing but ``pip install WHEEL``, and
the command and the version are run from there.

Building (setuptools, in pip's isolated build environment) and installing
(pydantic, jinja2) need the package registry. Without it the tests skip,
saying so, except under CI (the ``CI`` variable set), where they fail: CI must
check the wheel it would publish.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path, PurePosixPath
from typing import Final

import pytest

import veridic

ROOT: Final = Path(__file__).resolve().parents[1]
STUBS: Final = PurePosixPath("veridic/_sdk_stubs")
_OFFLINE: Final = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Name or service not known",
    "Max retries exceeded",
    "ProxyError",
    "No matching distribution found",
)
"""What pip prints when the registry cannot be reached (pip retries, then finds nothing)."""


@dataclass(frozen=True, slots=True)
class Wheel:
    path: Path
    names: frozenset[str]
    tracked: frozenset[PurePosixPath]
    """The checkout's files the wheel was built from, relative to the checkout."""


@dataclass(frozen=True, slots=True)
class Installed:
    bin: Path
    home: Path
    """A folder outside the checkout, the working directory of every command run."""


def unreachable(what: str, output: str) -> None:
    """The registry cannot be reached: skip (locally) or fail (under CI), saying why."""
    message = (
        f"{what} needs the package registry, which is not reachable "
        f"({output.strip().splitlines()[-1] if output.strip() else 'no output'})"
    )
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI must check the wheel it would publish, not skip it")
    pytest.skip(message)


def _run(command: list[str], what: str, cwd: Path, *, network: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=300
    )
    output = done.stdout + done.stderr
    if done.returncode != 0 and network and any(sign in output for sign in _OFFLINE):
        unreachable(what, output)
    assert done.returncode == 0, f"{what} exited {done.returncode}:\n{output[-3000:]}"
    return done.stdout


def _checkout_files() -> list[PurePosixPath]:
    """The files git would commit: tracked and present, or new and not ignored."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the wheel is built from the files git knows: not a git checkout")
    listed = _run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        "git ls-files",
        ROOT,
    )
    return sorted(
        {PurePosixPath(name) for name in listed.split("\0") if name and (ROOT / name).is_file()}
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    source = tmp_path_factory.mktemp("checkout")
    tracked = _checkout_files()
    for name in tracked:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), "."],
        "building the wheel",
        source,
        network=True,
    )
    (path,) = out.glob("veridic-*.whl")
    with zipfile.ZipFile(path) as archive:
        names = frozenset(archive.namelist())
    return Wheel(path, names, frozenset(tracked))


def _dist_info(wheel: Wheel) -> str:
    (folder,) = {name.split("/")[0] for name in wheel.names if ".dist-info/" in name}
    return folder


def _read(wheel: Wheel, name: str) -> str:
    with zipfile.ZipFile(wheel.path) as archive:
        return archive.read(name).decode("utf-8")


def test_the_wheel_holds_every_module_of_the_package_and_py_typed(wheel: Wheel) -> None:
    modules = {
        str(name.relative_to("src"))
        for name in wheel.tracked
        if name.parts[:2] == ("src", "veridic") and name.suffix == ".py"
    }
    assert "veridic/__init__.py" in modules
    assert "veridic/checks/stubs.py" in modules
    assert modules == {name for name in wheel.names if name.endswith(".py")}
    assert "veridic/py.typed" in wheel.names


def test_the_wheel_ships_the_sdk_stubs_as_they_are_in_the_checkout(wheel: Wheel) -> None:
    checkout = ROOT / "src" / STUBS
    expected = {
        str(STUBS / path.relative_to(checkout).as_posix())
        for path in checkout.rglob("*")
        if path.is_file()
    }
    assert f"{STUBS}/VERSIONS" in expected
    assert f"{STUBS}/openai/__init__.pyi" in expected
    assert f"{STUBS}/anthropic/resources/messages/messages.pyi" in expected
    assert {name for name in wheel.names if name.startswith(f"{STUBS}/")} == expected
    for name in sorted(expected):
        shipped = (ROOT / "src" / name).read_text(encoding="utf-8")
        assert _read(wheel, name) == shipped, name


def test_the_wheel_holds_nothing_but_the_package_and_its_metadata(wheel: Wheel) -> None:
    tops = {name.split("/")[0] for name in wheel.names}
    assert tops == {"veridic", _dist_info(wheel)}
    for unwanted in ("tests/", "benchmarks/", "examples/", "scripts/", ".venv/", "docs/"):
        assert not [name for name in wheel.names if unwanted in f"/{name}"], unwanted
    assert not [name for name in wheel.names if "__pycache__" in name or name.endswith(".pyc")]
    assert not [name for name in wheel.names if ".egg-info" in name]


def test_the_wheel_declares_the_command_the_version_and_the_licence(wheel: Wheel) -> None:
    entry_points = configparser.ConfigParser()
    entry_points.read_string(_read(wheel, f"{_dist_info(wheel)}/entry_points.txt"))
    assert dict(entry_points["console_scripts"]) == {"veridic": "veridic.cli:main"}
    metadata = Parser().parsestr(_read(wheel, f"{_dist_info(wheel)}/METADATA"))
    assert metadata["Name"] == "veridic"
    assert metadata["Version"] == veridic.__version__  # dynamic: veridic.__version__
    # PEP 639: the SPDX expression, and the licence text itself inside the wheel.
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    licence = _read(wheel, f"{_dist_info(wheel)}/licenses/LICENSE")
    assert licence == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License")


@pytest.fixture(scope="module")
def installed(wheel: Wheel, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    home = tmp_path_factory.mktemp("user")
    target = home / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel.path)],
        "pip install WHEEL",
        home,
        network=True,
    )
    return Installed(target / "bin", home)


def test_the_installed_command_and_version_work(wheel: Wheel, installed: Installed) -> None:
    usage = _run([str(installed.bin / "veridic"), "--help"], "veridic --help", installed.home)
    assert usage.startswith("usage: veridic")
    assert "stubs" in usage
    version = _run(
        [str(installed.bin / "python"), "-c", "import veridic; print(veridic.__version__)"],
        "import veridic",
        installed.home,
    )
    metadata = Parser().parsestr(_read(wheel, f"{_dist_info(wheel)}/METADATA"))
    assert version.strip() == metadata["Version"]
    where = _run(
        [str(installed.bin / "python"), "-c", "import veridic; print(veridic.__file__)"],
        "import veridic",
        installed.home,
    )
    assert Path(where.strip()).is_relative_to(installed.bin.parent)  # not the checkout's


def test_the_installed_command_writes_the_shipped_stubs(installed: Installed) -> None:
    out = _run(
        [str(installed.bin / "veridic"), "stubs", "typings"], "veridic stubs", installed.home
    )
    assert '"stubPath": "typings"' in out
    written = installed.home / "typings"
    checkout = ROOT / "src" / STUBS
    assert {
        path.relative_to(written).as_posix(): path.read_text(encoding="utf-8")
        for path in written.rglob("*")
        if path.is_file()
    } == {
        path.relative_to(checkout).as_posix(): path.read_text(encoding="utf-8")
        for path in checkout.rglob("*")
        if path.is_file()
    }


def test_without_the_registry_ci_fails_and_a_local_run_skips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    output = "ERROR: No matching distribution found for setuptools>=69\n"
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI must check the wheel"):
        unreachable("building the wheel", output)
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match=r"registry, which is not reachable"):
        unreachable("building the wheel", output)
