"""Every benchmark of the project in one go, then one table.

Run from the repository root: ``make bench`` (a venv of its own with the peers of
the ``bench`` extra, ``.venv/bench``), or ``.venv/bin/python benchmarks/run.py``
(the peers that are installed there). Options: ``--only request,sizes`` or
``--skip mypy_plugin`` choose the scripts; ``--quick`` runs few rounds (to check
that everything runs, not for figures); ``--profile`` prints where veridic's
time goes on the realistic request instead.

Each script runs in its own process (so no script warms another's caches) and
hands its rows back as JSON (``--json``); run alone, each prints its own part.
The rules every script follows (``benchmarks/_harness.py``): CPU time,
interleaved rounds, medians with their spread, outputs checked identical before
anything is timed, and the floor (the same output written by hand) as a row.

1. ``request``: the realistic request of issue 21 (floors, veridic, the gateway,
   peers);
2. ``sizes``: one 100 KB and one 10 MB document, against ``hashlib.sha256``;
   peak memory;
3. ``views``: views, capability section, tool specs, tool-list digest at 10, 50
   and 1,000 tools; nearest names against difflib;
4. ``lint``: booting 5,000 tools; ``veridic lint`` and ``veridic manifest`` of
   5,000 tools; near-duplicate detection; ``siblings``: the sibling lint's
   precision and recall on labelled pairs of public tool catalogs, and its
   join at thousands of tools against all pairs;
5. ``mypy_plugin``: mypy on a user project, with and without the plugin, with
   and without the provider SDKs installed;
6. ``templates``, 7. ``plans``, 8. ``audit``;
9. measured here: ``import veridic`` in a fresh interpreter, against
   ``python -c pass``;
10. ``adapters``: LangChain's model-call check on 200 tool answers, against the
    plain pass-through, and the Agents SDK's check of the same answers replayed.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import _harness as h

HERE: Final = Path(__file__).resolve().parent
SCRIPTS: Final = (
    "request",
    "sizes",
    "views",
    "lint",
    "siblings",
    "mypy_plugin",
    "templates",
    "plans",
    "audit",
    "audit_report",
    "adapters",
)
SCRIPT_TIMEOUT: Final = 1800


def run_scripts(names: Sequence[str], quick: bool) -> list[h.Report]:
    reports: list[h.Report] = []
    env = {**os.environ, **({"VERIDIC_BENCH_QUICK": "1"} if quick else {})}
    with tempfile.TemporaryDirectory(prefix="veridic-bench-") as folder:
        for name in names:
            path = Path(folder, f"{name}.json")
            start = time.perf_counter()
            print(f"  {name}.py ...", end="", file=sys.stderr, flush=True)
            try:
                done = subprocess.run(
                    [sys.executable, str(HERE / f"{name}.py"), "--json", str(path)],
                    capture_output=True,
                    text=True,
                    timeout=SCRIPT_TIMEOUT,
                    check=False,
                    env=env,
                )
            except subprocess.TimeoutExpired:
                print(f" did not finish in {SCRIPT_TIMEOUT} s: stopped", file=sys.stderr)
                reports.append(_failed(name, f"did not finish in {SCRIPT_TIMEOUT} s"))
                continue
            print(f" {time.perf_counter() - start:.0f} s", file=sys.stderr)
            if done.returncode != 0 or not path.exists():
                reports.append(_failed(name, (done.stderr or done.stdout).strip()[-2000:]))
                continue
            reports.append(h.read_report(path))
    return reports


def _failed(name: str, why: str) -> h.Report:
    report = h.Report(f"{name}.py")
    section = report.section(f"{name}.py FAILED", about=why.splitlines(), baselines=[])
    section.notes.append("no figures: the script stopped (see above)")
    return report


# --- 9. import time ------------------------------------------------------------------------------


def import_time(quick: bool) -> h.Report:
    report = h.Report("run.py")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import veridic'": [sys.executable, "-c", "import veridic"],
    }
    if importlib.util.find_spec("langchain_core") is not None:
        commands["python -c 'import langchain_core.prompts'"] = [
            sys.executable,
            "-c",
            "import langchain_core.prompts",
        ]
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(3 if quick else 9):
        for name, command in commands.items():
            samples[name].append(h.child_cpu(command))
    section = report.section(
        "9. import time, a fresh interpreter per run",
        about=["CPU seconds of the child process (user + system), interleaved rounds."],
        baselines=["python -c pass"],
    )
    base = statistics.median(samples["python -c pass"])
    for name, values in samples.items():
        stats = h.stats_of(values)
        section.timed(name, stats, against=(base,), note=f"+{(stats.median - base) * 1e3:.0f} ms")
    total, shares = _importtime("veridic")
    if total:
        parts = ", ".join(f"{name} {ms:.0f} ms" for name, ms in shares)
        section.notes.append(
            f"-X importtime of veridic: {total:.0f} ms in all; own time by package: {parts}"
        )
    return report


_GROUPS: Final = {
    "pydantic_core": "pydantic",
    "markupsafe": "jinja2",
    "annotated_types": "pydantic",
}


def _importtime(module: str) -> tuple[float, list[tuple[str, float]]]:
    """Milliseconds ``import module`` takes in all, and each package's own share, largest first.

    ``-X importtime`` prints a module's imports before it, one level deeper; the
    modules of ``module``'s own import are the deeper lines just before its line
    (the interpreter's start-up imports come earlier, at the top level).
    """
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
    )
    entries: list[tuple[float, float, int, str]] = []
    for line in done.stderr.splitlines():
        found = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$", line)
        if found is not None:
            own, cumulative, depth, name = found.groups()
            entries.append((float(own) / 1e3, float(cumulative) / 1e3, len(depth), name))
    top = next((i for i, e in enumerate(entries) if e[3] == module and e[2] <= 1), None)
    if top is None:
        return 0.0, []
    level = entries[top][2]
    first = top
    while first > 0 and entries[first - 1][2] > level:
        first -= 1
    shares: dict[str, float] = {}
    for own, _, _, name in entries[first : top + 1]:
        package = _GROUPS.get(name.split(".")[0], name.split(".")[0])
        shares[package] = shares.get(package, 0.0) + own
    listed = sorted(shares.items(), key=lambda item: -item[1])
    shown = [item for item in listed[:5] if item[1] >= 0.5]
    rest = sum(ms for name, ms in listed if (name, ms) not in shown)
    return entries[top][1], [*shown, ("others", rest)]


# --- the command line ---------------------------------------------------------------------------


def _peers() -> str:
    found = []
    for package in ("langchain-core", "mirascope", "pydantic-ai-slim", "banks"):
        try:
            found.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{package} (not installed)")
    return ", ".join(found)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", default="", help="comma-separated benchmark scripts to run")
    parser.add_argument("--skip", default="", help="comma-separated benchmark scripts to skip")
    parser.add_argument("--quick", action="store_true", help="few rounds: a check, not figures")
    parser.add_argument("--profile", action="store_true", help="profile the realistic request")
    args = parser.parse_args(argv)
    if args.profile:
        return subprocess.run([sys.executable, str(HERE / "request.py"), "--profile"]).returncode
    only = {n for n in args.only.split(",") if n}
    skip = {n for n in args.skip.split(",") if n}
    unknown = sorted((only | skip) - set(SCRIPTS))
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)}: choose from {', '.join(SCRIPTS)}")
    names = [n for n in SCRIPTS if (not only or n in only) and n not in skip]
    print(f"running {len(names)} benchmark script(s), each in its own process:", file=sys.stderr)
    load_before = h.load_average()
    started = time.perf_counter()
    reports = run_scripts(names, args.quick)
    reports.append(import_time(args.quick or h.QUICK))
    quick = "; QUICK (few rounds: a check, not figures)" if args.quick else ""
    print(
        f"veridic benchmarks, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC: "
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
        f"{time.perf_counter() - started:.0f} s in all{quick}"
    )
    print(f"load average before: {load_before}; after: {h.load_average()}")
    print(f"peers: {_peers()}")
    print(
        "times are CPU time per call (medians of interleaved rounds, with the interquartile "
        "range and the min-max range);"
    )
    print("'vs X' columns divide a row's median by X's, measured in the same rounds.")
    h.print_table(reports)
    return 0


if __name__ == "__main__":
    sys.exit(main())
