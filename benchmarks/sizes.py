"""One large document, each data mode: compose, render, hash and unfence against plain SHA-256.

The document is the request benchmark's three documents repeated to 100,000 and
to 10,000,000 characters (English with tags and brackets, French with a CRLF
line, curly quotes, dashes and a zero-width space), about 1.01 bytes of UTF-8
per character. For each size and each data mode (``datamark``, ``encode``,
``verbatim``):

- **all four**: ``Composer(data_mode=...)`` with one trusted system part, the
  document as a data block, a question; ``build()``; ``to_openai()``;
  ``prompt.sha256``; ``unfence()`` of the block's message;
- **compose + render**: the first two steps alone;
- **Prompt.sha256**: the hash of a fresh ``Prompt`` of the same messages (the
  property is cached per prompt, so each call hashes anew);
- **unfence**: reading the block back (checked: it gives back the document).

Baselines, measured in the same interleaved rounds:

- **sha256(bytes)**: ``hashlib.sha256`` of the document's UTF-8 bytes, encoded
  beforehand: the ratio column divides by it (issue 21's targets: the prompt
  hash within 1.5x of it, unfence within 2x, at 10 MB);
- **encode + sha256**: the same with the encoding, what hashing a ``str`` costs;
- **prompt hash by hand**: ``Prompt.sha256``'s documented encoding written as
  one ``str.join`` and one ``hashlib.sha256`` (checked equal to veridic's).

Then peak memory (``tracemalloc``) of compose (with ``build()``), of
``Prompt.sha256`` and of ``unfence`` at 10 MB, as a multiple of the document's
UTF-8 size (issue 21's target: at most 1.5x), and of the same floor steps.

Run: ``.venv/bin/python benchmarks/sizes.py``
"""

from __future__ import annotations

import hashlib
import tracemalloc
from collections.abc import Callable, Sequence
from functools import partial
from typing import Final

import _harness as h
from request import DOCUMENTS  # the same texts as the realistic request

from veridic import Composer, Prompt, instruction, unfence, untrusted
from veridic.text.fence import DATA_MODES, DataMode
from veridic.text.prompt import Message

HASH_HEADER: Final = b"veridic.prompt/2\0"
SIZES: Final = (("100 KB", 100_000), ("10 MB", 10_000_000))
SYSTEM: Final = instruction("Summarise the document for the customer in five sentences.")
QUESTION: Final = "What does this document say about the orange light?"


def document(size: int) -> str:
    unit = "".join(text for _, text in DOCUMENTS)
    return (unit * (size // len(unit) + 1))[:size]


def compose(text: str, mode: DataMode) -> Prompt:
    return (
        Composer(data_mode=mode)
        .system(SYSTEM)
        .data("upload:report.txt", untrusted(text, source="upload:report.txt"))
        .user(QUESTION)
        .build()
    )


def by_hand(prompt: Prompt) -> str:
    """``Prompt.sha256``'s encoding (version 2), written out: header, then ``len:text``."""
    pieces: list[str] = []
    for m in prompt.messages:
        pieces += (m.role, m.content, str(len(m.tool_calls)))
        for call in m.tool_calls:
            pieces += (call.id, call.name, call.arguments)
        pieces += (m.tool_call_id or "", str(len(m.reasoning)))
    encoded = "".join([f"{len(piece)}:{piece}" for piece in pieces])
    return hashlib.sha256(HASH_HEADER + encoded.encode("utf-8", "surrogatepass")).hexdigest()


def contenders(text: str, data: bytes) -> tuple[list[h.Contender], list[str]]:
    made = [
        h.Contender("sha256(bytes)", lambda: hashlib.sha256(data).hexdigest()),
        h.Contender("encode + sha256", lambda: hashlib.sha256(text.encode("utf-8")).hexdigest()),
    ]
    notes: list[str] = []
    reference = compose(text, "datamark")
    if by_hand(reference) != reference.sha256:
        notes.append(
            "prompt hash by hand: NOT veridic's (Prompt.sha256's encoding changed; update "
            "benchmarks/sizes.py); timed all the same"
        )
    made.append(h.Contender("prompt hash by hand", lambda: by_hand(reference)))
    for mode in DATA_MODES:
        prompt = compose(text, mode)
        block = prompt.messages[1].content
        if unfence(block) != [("upload:report.txt", text)]:
            h.fail(f"unfence() of the {mode} block does not give the document back")
        if Prompt(prompt.messages).sha256 != prompt.sha256:
            h.fail("Prompt.sha256 of the same messages differs")
        messages = prompt.messages

        def everything(mode: DataMode = mode) -> object:
            built = compose(text, mode)
            built.to_openai()
            return built.sha256, unfence(built.messages[1].content)

        def rendered(mode: DataMode = mode) -> object:
            return compose(text, mode).to_openai()

        made += [
            h.Contender(f"{mode}: all four", everything),
            h.Contender(f"{mode}: compose + render", rendered),
            h.Contender(f"{mode}: Prompt.sha256", partial(fresh_hash, messages)),
            h.Contender(f"{mode}: unfence", partial(unfence, block)),
        ]
    return made, notes


def fresh_hash(messages: tuple[Message, ...]) -> str:
    """The hash of a new prompt of ``messages`` (the property is cached per prompt)."""
    return Prompt(messages).sha256


def peak(action: Callable[[], object]) -> int:
    """Bytes allocated at the peak of ``action``, beyond what was allocated before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        kept = action()
        highest = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del kept
    return highest - before


def memory(text: str, data: bytes, section: h.Section) -> None:
    size = len(data)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("floor: encode + sha256", lambda: hashlib.sha256(text.encode("utf-8")).hexdigest()),
    ]
    reference = compose(text, "datamark")
    rows.append(("floor: prompt hash by hand", lambda: by_hand(reference)))
    for mode in DATA_MODES:
        prompt = compose(text, mode)
        block = prompt.messages[1].content
        rows += [
            (f"{mode}: compose (build)", partial(compose, text, mode)),
            (f"{mode}: Prompt.sha256", partial(fresh_hash, prompt.messages)),
            (f"{mode}: unfence", partial(unfence, block)),
        ]
    for name, action in rows:
        used = min(peak(action) for _ in range(2))
        section.add(h.Row(name, used / size, unit="x", note=f"peak {used / 1e6:.1f} MB"))


def main(argv: Sequence[str] | None = None) -> None:
    report = h.Report("sizes.py")
    for label, size in SIZES:
        text = document(size)
        data = text.encode("utf-8")
        made, notes = contenders(text, data)
        big = size > 1_000_000
        timings = h.measure(made, rounds=7 if big else 15, budget=0.05 if big else 0.02)
        section = report.section(
            f"2. one {label} document ({len(data):,} bytes of UTF-8), per call",
            about=[
                "all four = compose + render + Prompt.sha256 + unfence; CPU time, interleaved "
                "rounds; unfence checked to give the document back.",
            ],
            baselines=["sha256(bytes)"],
        )
        base = timings["sha256(bytes)"].median
        for contender in made:
            stats = timings[contender.name]
            mbps = len(data) / stats.median / 1e6
            section.timed(contender.name, stats, against=(base,), note=f"{mbps:,.0f} MB/s")
        section.notes += notes
    text = document(SIZES[-1][1])
    data = text.encode("utf-8")
    section = report.section(
        f"2b. peak memory at 10 MB, as a multiple of the document's {len(data):,} UTF-8 bytes",
        about=[
            "tracemalloc: the highest allocation during the step beyond what was allocated "
            "before it, result included (the smaller of 2 runs).",
            "The document itself is held as a str of 2 bytes per character (it holds "
            "characters beyond Latin-1), about 2x its UTF-8 size.",
        ],
        baselines=[],
    )
    memory(text, data, section)
    h.finish(report, argv)


if __name__ == "__main__":
    main()
