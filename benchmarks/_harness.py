"""What every benchmark of benchmarks/ measures with, and how its rows reach the one table.

Timing rules, the same for every script:

- **CPU time** of this process (``time.process_time``): the machine is shared,
  and time spent descheduled is not the code's;
- **interleaved rounds**: each round runs one batch of every contender, in an
  order rotated from round to round, so that load which comes and goes hits
  every contender alike;
- a batch lasts about ``budget`` seconds (the number of calls is calibrated
  once per contender); a garbage collection runs before each batch, outside
  the timing, so no contender pays for another's garbage;
- the **median** per call over the rounds is the figure, with the
  **interquartile range** and the min-max range as its spread;
- output is checked before anything is timed, by each script (see
  :func:`same_bytes`): a contender either produces what the reference
  produces, byte for byte, or is labelled as not comparable with the
  difference stated.

A script builds a :class:`Report` of sections and rows and calls
:func:`finish`: run alone it prints its part of the table; run by
``benchmarks/run.py`` (``--json PATH``) it writes the rows there, and run.py
prints every script's rows as one table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final, NoReturn

QUICK: Final = os.environ.get("VERIDIC_BENCH_QUICK") == "1"
"""Fewer rounds (``--quick``): for checking that a script runs, not for figures."""

Call = Callable[[], object]


@dataclass(frozen=True)
class Contender:
    """One way of doing a benchmark's work.

    ``run`` is one call, the unit that is timed. ``batch``, when given, builds
    (untimed) what a batch of ``n`` calls needs and returns the call to time,
    for work that consumes state (a scripted provider's answers, a cached
    property that must be computed afresh).
    """

    name: str
    run: Call
    batch: Callable[[int], Call] | None = None

    def prepared(self, number: int) -> Call:
        return self.batch(number) if self.batch is not None else self.run


@dataclass(frozen=True)
class Stats:
    """Seconds per call over the rounds of one contender."""

    median: float
    q1: float
    q3: float
    low: float
    high: float
    rounds: int
    calls: int  # per batch


def measure(
    contenders: Sequence[Contender],
    *,
    rounds: int = 21,
    budget: float = 0.02,
    most: int | None = None,
    calls: int | None = None,
) -> dict[str, Stats]:
    """Seconds per call of each contender: interleaved rounds of CPU-timed batches.

    ``most`` caps the calls of a batch (for work whose state costs memory);
    ``calls`` fixes them and skips the calibration (for work that takes
    seconds, warmed up by the caller).
    """
    if QUICK:
        rounds = min(rounds, 3)
    numbers: dict[str, int] = {}
    for contender in contenders:
        if calls is not None:
            numbers[contender.name] = calls
            continue
        once = _timed(contender.prepared(1), 1)  # also the warm-up
        if once < budget:
            once = min(once, *(_timed(contender.prepared(1), 1) for _ in range(2)))
        number = max(1, int(budget / max(once, 1e-7)))
        numbers[contender.name] = number if most is None else min(number, most)
    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
    for index in range(rounds):
        shift = index % len(contenders)
        for contender in [*contenders[shift:], *contenders[:shift]]:
            number = numbers[contender.name]
            call = contender.prepared(number)
            samples[contender.name].append(_timed(call, number) / number)
    return {name: _stats(values, numbers[name]) for name, values in samples.items()}


def _timed(call: Call, number: int) -> float:
    gc.collect()
    start = time.process_time()
    for _ in range(number):
        call()
    return time.process_time() - start


def _stats(values: list[float], calls: int) -> Stats:
    ordered = sorted(values)
    if len(ordered) >= 4:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1, q3 = ordered[0], ordered[-1]
    return Stats(statistics.median(ordered), q1, q3, ordered[0], ordered[-1], len(ordered), calls)


def stats_of(values: Sequence[float]) -> Stats:
    """The same statistics of samples measured some other way (one per round)."""
    return _stats(list(values), 1)


def child_cpu(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    ok: tuple[int, ...] = (0,),
) -> float:
    """CPU seconds (user + system) of one child process, which must exit with a code in ``ok``.

    For what runs in its own process (mypy, the command line, a fresh
    interpreter): its own CPU time, not the wall time a busy machine stretches.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        list(command), capture_output=True, text=True, check=False, cwd=cwd, env=env
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok:
        raise SystemExit(
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# --- checking output ------------------------------------------------------------------------


def same_bytes(reference: object, other: object) -> bool:
    """Whether two outputs are the same JSON text, byte for byte (keys in their order)."""
    return _dumped(reference) == _dumped(other)


def _dumped(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def first_difference(reference: object, other: object, context: int = 60) -> str:
    """Where two outputs' JSON texts part, for an error message."""
    a, b = _dumped(reference).decode(), _dumped(other).decode()
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return (
        f"at character {at}: expected ...{a[max(0, at - context) : at + context]!r}..., "
        f"got ...{b[max(0, at - context) : at + context]!r}..."
    )


# --- rows and the table ---------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table: a contender's figure, its spread and its ratios."""

    name: str
    value: float
    q1: float | None = None
    q3: float | None = None
    low: float | None = None
    high: float | None = None
    unit: str = "s"  # "s" per call, "x" a multiple, "B" bytes, "/s" a rate
    ratios: list[float | None] = field(default_factory=list)
    note: str = ""


@dataclass
class Section:
    """A block of rows measured together, with the baselines its ratio columns divide by."""

    title: str
    about: list[str] = field(default_factory=list)
    baselines: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def timed(
        self,
        name: str,
        stats: Stats,
        *,
        against: Sequence[float | None] = (),
        note: str = "",
    ) -> Row:
        """Add a row of seconds per call; ``against`` are the baselines' medians."""
        row = Row(
            name,
            stats.median,
            stats.q1,
            stats.q3,
            stats.low,
            stats.high,
            ratios=[None if base is None else stats.median / base for base in against],
            note=note,
        )
        self.rows.append(row)
        return row

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row


@dataclass
class Report:
    """Every section one script measured."""

    script: str
    sections: list[Section] = field(default_factory=list)
    load: str = ""

    def section(self, title: str, *, about: list[str], baselines: list[str]) -> Section:
        made = Section(title, about, baselines)
        self.sections.append(made)
        return made


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min) on {os.cpu_count()} CPUs"


def finish(report: Report, argv: Sequence[str] | None = None) -> None:
    """Print the report's part of the table, or write it where ``--json`` says."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, default=None, help="write the rows here instead")
    args, _ = parser.parse_known_args(argv)
    report.load = load_average()
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(report)), encoding="utf-8")
        return
    print_table([report])


def read_report(path: Path) -> Report:
    raw = json.loads(path.read_text(encoding="utf-8"))
    sections = [
        Section(
            s["title"],
            s["about"],
            s["baselines"],
            [Row(**r) for r in s["rows"]],
            s["notes"],
        )
        for s in raw["sections"]
    ]
    return Report(raw["script"], sections, raw["load"])


WIDTH: Final = 100


def print_table(reports: Sequence[Report], out: Callable[[str], None] = print) -> None:
    """All the rows, section by section: figure, spread, ratios, and the sections' notes."""
    for report in reports:
        for section in report.sections:
            out("")
            out(f"== {section.title} ({report.script}) ".ljust(WIDTH, "="))
            for line in section.about:
                out(f"   {line}")
            widths = [max(18, len(base) + 5) for base in section.baselines]
            heads = "".join(
                f"{'vs ' + base:>{width}}"
                for base, width in zip(section.baselines, widths, strict=True)
            )
            spread = any(row.q1 is not None or row.low is not None for row in section.rows)
            value, what = ("median", "IQR (min-max)") if spread else ("value", "")
            out(f"   {'contender':<42}{value:>11}  {what:<27}{heads}")
            for row in section.rows:
                out("   " + _row_text(row, widths))
            for note in section.notes:
                out(f"   {note}")


def _row_text(row: Row, widths: Sequence[int]) -> str:
    name = row.name if len(row.name) <= 41 else row.name[:40] + "…"
    value = _figure(row.value, row.unit)
    spread = ""
    if row.q1 is None and row.low is not None and row.high is not None:
        low, high = (_figure(v, row.unit, bare=True) for v in (row.low, row.high))
        spread = f"({low}-{high})"
    if row.q1 is not None and row.q3 is not None:
        spread = f"{_figure(row.q1, row.unit, bare=True)}-{_figure(row.q3, row.unit)}"
        if row.low is not None and row.high is not None:
            low, high = (_figure(v, row.unit, bare=True) for v in (row.low, row.high))
            spread += f" ({low}-{high})"
    ratios = "".join(
        f"{_ratio(ratio):>{width}}" for ratio, width in zip(row.ratios, widths, strict=False)
    )
    note = f"  {row.note}" if row.note else ""
    return f"{name:<42}{value:>11}  {spread:<27}{ratios}{note}"


def _figure(value: float, unit: str, *, bare: bool = False) -> str:
    if unit == "s":
        for below, factor, suffix in ((1e-6, 1e9, "ns"), (1e-3, 1e6, "us"), (1.0, 1e3, "ms")):
            if value < below:
                return _digits(value * factor) + ("" if bare else f" {suffix}")
        return _digits(value) + ("" if bare else " s")
    if unit == "x":
        return f"{value:.2f}" if bare else f"{value:.2f}x"
    if unit == "B":
        return f"{value / 1e6:.1f}" if bare else f"{value / 1e6:.1f} MB"
    if unit == "/s":
        return f"{value:,.0f}" if bare else f"{value:,.0f}/s"
    return f"{value:.3g}" if bare else f"{value:.3g} {unit}"


def _ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    if ratio < 0.1:
        return f"1/{1 / ratio:,.0f}x" if ratio > 0 else "0x"
    return f"{_digits(ratio)}x"


def _digits(number: float) -> str:
    """Three significant digits, never in exponent form."""
    if number >= 100:
        return f"{number:,.0f}"
    if number >= 10:
        return f"{number:.1f}"
    return f"{number:.2f}"


def fail(message: str) -> NoReturn:
    """Stop the script: its output is wrong, so its timings would mean nothing."""
    print(f"benchmark check failed: {message}", file=sys.stderr)
    raise SystemExit(1)
