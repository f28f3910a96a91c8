"""Boot and CI at 5,000 tools: booting a registry, ``veridic lint`` and ``veridic manifest``.

Run: ``.venv/bin/python benchmarks/lint.py``. The tools have the descriptions
an application grows (:func:`descriptions`: feature areas of about 40 tools, 3%
near-copies, so the lint has near-duplicates to report). Three parts:

1. **Booting 5,000 tools**, per tool, a fresh registry and fresh function
   objects every round (nothing is cached from an earlier round):
   ``Registry()``, ``@registry.tool`` on each function, ``registry.boot()``;
   then the same followed by the first ``view()`` and its OpenAI specs (where
   a lazy boot pays what it deferred). Against: reading each function
   (``inspect.signature`` and the docstring: the floor of any registry) and
   pydantic's ``TypeAdapter(function).json_schema()`` (a schema per tool, the
   way a hand-written registry on pydantic gets one; no docstring parsing);
   and, when installed, the peers turning the same functions into tools with
   their specs (langchain-core's ``StructuredTool.from_function`` and
   ``convert_to_openai_tool``, pydantic-ai's ``Tool(...).tool_def``,
   mirascope's ``llm.tool``), on 1,000 tools (their cost per tool is flat, and
   5,000 would take them minutes a round).
2. **The command line**, a fresh process per run as CI starts it, over a
   generated module of 5,000 tools: ``python -c "import module"`` (what any
   CI step that loads the application pays), ``veridic lint module:registry``
   and ``veridic manifest module:registry -o FILE``, each resolving every
   tool, the lint's near-duplicate search included. CPU time of the child
   process (user + system). Issue 21's target: lint + manifest under 2 s.
3. **Near-duplicate detection** at 1,000, 2,000 and 4,000 descriptions: the
   prefix-filtered join the lint uses against the naive all-pairs comparison
   (checked to find the same pairs at 1,000; at 2,000 and 4,000 the naive
   time is its cost per pair at 1,000 times the number of pairs).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import random
import statistics
import sys
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal, cast

import _harness as h
import pydantic
from _in_source import written_in_source

from veridic import Registry
from veridic.tools._similarity import _join, naive_similar_pairs

THRESHOLD: Final = 0.7
TOOLS: Final = 5_000
VERBS: Final = ("read", "list", "find", "create", "update", "archive", "close", "delete", "export")
SYLLABLES: Final = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "fe", "gi", "ho")
COMMON: Final = ("with", "its", "current", "status", "for", "the", "given", "so", "and", "can")


def descriptions(count: int, seed: int = 7) -> dict[str, str]:
    """Tool descriptions as an application grows them.

    Tools come in feature areas of about 40 (an application with more tools has
    more areas, each with its own entities and vocabulary): a verb, one of the
    area's 8 entities, 6-14 of its 25 words and 2-6 common words. About 3% are
    near-copies of an earlier description with one word changed.
    """
    rng = random.Random(seed)
    areas = max(1, count // 40)
    needed = areas * 33
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < needed:
        word = "".join(rng.choice(SYLLABLES) for _ in range(4))
        if word not in seen:
            seen.add(word)
            words.append(word)
    out: dict[str, str] = {}
    for index in range(count):
        if out and rng.random() < 0.03:
            chosen = rng.choice(list(out.values())).split()
            chosen[rng.randrange(len(chosen))] = rng.choice(COMMON)
        else:
            area = words[(index % areas) * 33 : (index % areas + 1) * 33]
            entities, vocabulary = area[:8], area[8:]
            chosen = [rng.choice(VERBS), "a", rng.choice(entities)]
            chosen += rng.sample(vocabulary, rng.randint(6, 14))
            chosen += rng.sample(COMMON, rng.randint(2, 6))
        out[f"tool_{index}"] = " ".join(chosen).capitalize() + "."
    return out


def templated(count: int) -> dict[str, str]:
    return {f"tool_{i}": f"Apply change number {i} to a user's account." for i in range(count)}


def _handler(index: int, description: str) -> Callable[..., str]:
    def handler(record_id: int, note: str = "") -> str:
        """(docstring written by written_in_source)"""
        return f"{index}:{record_id}:{note}"

    handler.__name__ = handler.__qualname__ = f"tool_{index}"
    written_in_source(
        handler,
        f"""{description}

    Args:
        record_id: The record to act on.
        note: Why, for the audit log.
    """,
    )
    return handler


def _fails() -> None:
    raise RuntimeError("requires core >= 2.3")


def functions(count: int) -> list[Callable[..., str]]:
    """Fresh function objects (no cache keyed by function can carry over between rounds)."""
    return [_handler(i, text) for i, text in enumerate(descriptions(count).values())]


def register(made: list[Callable[..., str]]) -> Registry:
    registry = Registry(f"lint-bench-{len(made)}")
    pro = registry.component("Pro extension", boot=_fails, hint="Upgrade core.", provides="Extras")
    for index, function in enumerate(made):
        owner = pro if index % 50 == 49 else registry
        kind: Literal["query", "write"] = "query" if index % 2 else "write"
        owner.tool(kind=kind)(function)
    return registry


# --- 1. booting --------------------------------------------------------------------------------


PEER_TOOLS: Final = 1_000
"""The peers boot fewer tools (their cost per tool is flat, and 5,000 take them minutes)."""


def _fresh(
    work: Callable[[list[Callable[..., str]]], object], count: int
) -> Callable[[int], h.Call]:
    """A batch builder: ``count`` fresh functions (untimed), then ``work`` on them (timed)."""

    def batch(number: int) -> h.Call:
        if number != 1:
            raise ValueError("one boot per batch")
        made = functions(count)
        return partial(work, made)

    return batch


def _boot(made: list[Callable[..., str]]) -> object:
    registry = register(made)
    registry.boot()
    return registry


def _boot_and_view(made: list[Callable[..., str]]) -> object:
    registry = register(made)
    registry.boot()
    return registry.view().tool_specs("openai")


def _read(made: list[Callable[..., str]]) -> object:
    return [(inspect.signature(f), inspect.getdoc(f)) for f in made]


def _type_adapter(made: list[Callable[..., str]]) -> object:
    return [pydantic.TypeAdapter(cast(Any, f)).json_schema() for f in made]


def _peers() -> tuple[list[tuple[str, Callable[[list[Callable[..., str]]], object]]], list[str]]:
    found: list[tuple[str, Callable[[list[Callable[..., str]]], object]]] = []
    missing: list[str] = []
    logging.getLogger("griffe").setLevel(logging.ERROR)
    if importlib.util.find_spec("langchain_core") is not None:
        tools = importlib.import_module("langchain_core.tools")
        calling = importlib.import_module("langchain_core.utils.function_calling")

        def langchain(made: list[Callable[..., str]]) -> object:
            return [
                calling.convert_to_openai_tool(
                    tools.StructuredTool.from_function(f, parse_docstring=True)
                )
                for f in made
            ]

        version = importlib.metadata.version("langchain-core")
        found.append((f"langchain-core {version}: StructuredTool + spec", langchain))
    else:
        missing.append("langchain-core")
    if importlib.util.find_spec("pydantic_ai") is not None:
        ai = importlib.import_module("pydantic_ai")

        def pydantic_ai(made: list[Callable[..., str]]) -> object:
            return [ai.Tool(f).tool_def for f in made]

        version = importlib.metadata.version("pydantic-ai-slim")
        found.append((f"pydantic-ai {version}: Tool(f).tool_def", pydantic_ai))
    else:
        missing.append("pydantic-ai-slim")
    if importlib.util.find_spec("mirascope") is not None:
        llm = importlib.import_module("mirascope.llm")

        def mirascope(made: list[Callable[..., str]]) -> object:
            return [llm.tool(f) for f in made]

        version = importlib.metadata.version("mirascope")
        found.append((f"mirascope {version}: llm.tool(f)", mirascope))
    else:
        missing.append("mirascope")
    return found, missing


def booting(report: h.Report) -> None:
    works: list[tuple[str, Callable[[list[Callable[..., str]]], object], int]] = [
        ("veridic: register + boot", _boot, TOOLS),
        ("veridic: + first view and its specs", _boot_and_view, TOOLS),
        ("inspect.signature + docstring", _read, TOOLS),
        ("pydantic TypeAdapter(f).json_schema()", _type_adapter, TOOLS),
    ]
    peers, missing = _peers()
    works += [(name, work, PEER_TOOLS) for name, work in peers]
    for _, work, _ in works:
        work(functions(50))  # imports and first-use set-up, before anything is timed
    counts = {name: count for name, _, count in works}
    contenders = [h.Contender(name, _unused, _fresh(work, count)) for name, work, count in works]
    timings = h.measure(contenders, rounds=3, calls=1)
    section = report.section(
        f"4. booting {TOOLS:,} tools, per tool",
        about=[
            "A fresh registry and fresh functions every round; CPU time, 3 interleaved rounds; "
            f"the peers boot {PEER_TOOLS:,} tools (per tool, their cost is flat).",
            "Target (issue 21): <= 0.2 ms per tool.",
        ],
        baselines=["signature", "TypeAdapter"],
    )
    floor = timings["inspect.signature + docstring"].median / TOOLS
    adapter = timings["pydantic TypeAdapter(f).json_schema()"].median / TOOLS
    for contender in contenders:
        stats = timings[contender.name]
        count = counts[contender.name]
        per_tool = h.Stats(
            stats.median / count,
            stats.q1 / count,
            stats.q3 / count,
            stats.low / count,
            stats.high / count,
            stats.rounds,
            stats.calls,
        )
        section.timed(
            contender.name,
            per_tool,
            against=(floor, adapter),
            note=f"{stats.median:.2f} s for {count:,}",
        )
    if missing:
        section.notes.append(f"peers not installed, not measured: {', '.join(missing)}")


def _unused() -> object:
    raise AssertionError("booting contenders run through their batch builder")


# --- 2. the command line -----------------------------------------------------------------------


def module_source(count: int) -> str:
    """An application module: ``count`` documented functions, registered by decorators."""
    parts = [
        '"""Generated by benchmarks/lint.py: an application with many tools."""\n',
        "from veridic import Registry\n\n",
        'registry = Registry("app")\n',
        "\n\ndef _fails() -> None:\n"
        '    raise RuntimeError("requires core >= 2.3")\n\n\n'
        "pro = registry.component(\n"
        '    "Pro extension", boot=_fails, hint="Upgrade core.", provides="Extras"\n'
        ")\n",
    ]
    for index, text in enumerate(descriptions(count).values()):
        owner = "pro" if index % 50 == 49 else "registry"
        kind = "query" if index % 2 else "write"
        parts.append(
            textwrap.dedent(
                f'''

                @{owner}.tool(kind="{kind}")
                def tool_{index}(record_id: int, note: str = "") -> str:
                    """{text}

                    Args:
                        record_id: The record to act on.
                        note: Why, for the audit log.
                    """
                    return f"{{record_id}}:{{note}}"
                '''
            )
        )
    return "".join(parts)


def command_line(report: h.Report) -> None:
    with tempfile.TemporaryDirectory(prefix="veridic-lint-bench-") as name:
        folder = Path(name)
        (folder / "bench_app.py").write_text(module_source(TOOLS), encoding="utf-8")
        (folder / "pyproject.toml").write_text("[tool.veridic]\n", encoding="utf-8")
        manifest = folder / "tools.json"
        python = sys.executable
        commands = {
            "python -c 'import bench_app'": [python, "-c", "import bench_app"],
            "veridic lint": [python, "-m", "veridic", "lint", "bench_app:registry"],
            "veridic manifest -o FILE": [
                python,
                "-m",
                "veridic",
                "manifest",
                "bench_app:registry",
                "-o",
                str(manifest),
            ],
        }
        env = {**_environment(), "PYTHONPATH": str(folder)}
        # Once each: byte-compile the module, and check that every command works.
        for command in commands.values():
            h.child_cpu(command, cwd=folder, env=env, ok=(0, 1))
        samples: dict[str, list[float]] = {name: [] for name in commands}
        samples["lint + manifest"] = []
        rounds = 2 if h.QUICK else 5
        for _ in range(rounds):
            for label, command in commands.items():
                samples[label].append(h.child_cpu(command, cwd=folder, env=env, ok=(0, 1)))
            samples["lint + manifest"].append(
                samples["veridic lint"][-1] + samples["veridic manifest -o FILE"][-1]
            )
    section = report.section(
        f"4b. the command line on {TOOLS:,} tools, a fresh process per run",
        about=[
            "CPU seconds of the child process (user + system), "
            f"{rounds} interleaved rounds; resolving every tool and the near-duplicate "
            "search included.",
            "Target (issue 21): lint + manifest under 2 s together.",
        ],
        baselines=["import"],
    )
    base = statistics.median(samples["python -c 'import bench_app'"])
    for label, values in samples.items():
        section.timed(label, h.stats_of(values), against=(base,))


def _environment() -> dict[str, str]:
    """The parent's environment without veridic's settings, and with bytecode caching on.

    A CI job imports the application from its cached bytecode after the first
    run; with ``PYTHONDONTWRITEBYTECODE`` inherited, every child would compile the
    1.7 MB module again (~0.3 s a process) and the figures would depend on the shell.
    """
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("VERIDIC_") and key != "PYTHONDONTWRITEBYTECODE"
    }


# --- 3. near-duplicates ------------------------------------------------------------------------


def near_duplicates(report: h.Report) -> None:
    section = report.section(
        "4c. near-duplicate descriptions (threshold 0.7): prefix-filtered join vs all pairs",
        about=[
            "CPU time, median of 3 rounds; the naive comparison is timed once at 1,000 (and "
            "checked to find the same pairs), extrapolated beyond.",
        ],
        baselines=["all pairs"],
    )
    for label, make in (("realistic", descriptions), ("templated", templated)):
        per_pair = 0.0
        for count in (1000, 2000, 4000):
            texts = make(count)
            join = h.measure([h.Contender("join", partial(_join, texts, THRESHOLD))], rounds=3)
            pairs, scored = _join(texts, THRESHOLD)
            every = count * (count - 1) // 2
            note = f"{len(pairs)} pairs found, {scored:,} of {every:,} pairs scored"
            if count == 1000:
                naive = h.measure(
                    [
                        h.Contender(
                            "naive", partial(naive_similar_pairs, texts, threshold=THRESHOLD)
                        )
                    ],
                    rounds=1,
                    calls=1,
                )["naive"].median
                if naive_similar_pairs(texts, threshold=THRESHOLD) != pairs:
                    h.fail("the join and the naive comparison find different pairs")
                per_pair = naive / every
            else:
                naive = per_pair * every
                note += " (all pairs extrapolated)"
            section.timed(
                f"{label}, {count:,} descriptions: join",
                join["join"],
                against=(naive,),
                note=note,
            )


def main(argv: Sequence[str] | None = None) -> None:
    logging.getLogger("veridic").setLevel(logging.ERROR)  # the failing component warns
    report = h.Report("lint.py")
    booting(report)
    command_line(report)
    near_duplicates(report)
    h.finish(report, argv)


if __name__ == "__main__":
    main()
