"""A type: ignore of mypy's own code that kept a plain str as a TrustedInstruction
(veridic-forge). mypy refuses `return reply` from a function declared to return a
TrustedInstruction (return-value), `prompt: TrustedInstruction = reply` (assignment) and
`hint(reply)` where the project's own hint() takes a TrustedInstruction (arg-type);
silenced, the value stayed typed trusted, and veridic hatches lists only veridic's codes.
An argument of veridic's own (Composer.system()) is refused by the run time there.
"""

from collections.abc import Iterable

from veridic import Composer, Registry, TrustedInstruction, join


def forged(reply: str) -> TrustedInstruction:
    return reply  # type: ignore[return-value]  # E: [veridic-forge] silenced mypy's return-value


def kept(reply: str) -> None:
    # E: [veridic-forge] silenced mypy's assignment error here
    prompt: TrustedInstruction = reply  # type: ignore[assignment]
    Composer().system(prompt)


def reviewed(reply: str) -> TrustedInstruction:
    return reply  # type: ignore[return-value, veridic-forge]


def refused_at_run_time(reply: str) -> None:
    Composer().system(reply)  # type: ignore[arg-type]
    join([reply])  # type: ignore[list-item]


def hint(text: TrustedInstruction) -> None:
    """The project's own function: a TrustedText position takes its parameter as minted."""
    Registry().component("billing", hint=text)


def hints(texts: list[TrustedInstruction]) -> None:
    for text in texts:
        hint(text)


def passed_on(reply: str) -> None:
    # The project's own TrustedInstruction parameter: nothing refuses the str at run time.
    hint(reply)  # type: ignore[arg-type]  # E: [veridic-forge] silenced mypy's arg-type
    hints([reply])  # type: ignore[list-item]  # E: [veridic-forge] silenced mypy's list-item
    # E: [veridic-forge] silenced mypy's list-item
    kept: list[TrustedInstruction] = [reply]  # type: ignore[list-item]
    hints(kept)
    hint(Composer().system(reply).build().sha256)  # type: ignore[arg-type]  # E: [veridic-forge]
    hint(reply)  # type: ignore[arg-type, veridic-forge]


def not_silenced(reply: str) -> TrustedInstruction:
    # An ignore of another code silences nothing: mypy's own error stands, and no
    # veridic-forge says it was silenced.
    # E: [return-value] Incompatible return value # E: [unused-ignore] Unused "type: ignore"
    return reply  # type: ignore[misc]


def by_name(texts: dict[str, TrustedInstruction]) -> None:
    for text in texts.values():
        hint(text)


def by_pair(pairs: list[tuple[str, TrustedInstruction]]) -> None:
    for _, text in pairs:
        hint(text)


def unrelated(counts: dict[str, int], pairs: list[tuple[str, int]]) -> None:
    # Mismatches whose str is a key or another item, not where a TrustedInstruction is
    # expected: their ignore kept no text as trusted, and forged nothing.
    by_name(counts)  # type: ignore[arg-type]
    by_pair(pairs)  # type: ignore[arg-type]


def related(labels: dict[str, str], pairs: list[tuple[int, str]]) -> None:
    by_name(labels)  # type: ignore[arg-type]  # E: [veridic-forge] silenced mypy's arg-type
    by_pair(pairs)  # type: ignore[arg-type]  # E: [veridic-forge] silenced mypy's arg-type


def each(texts: Iterable[TrustedInstruction]) -> None:
    for text in texts:
        hint(text)


def items_of_another_shape(reply: str, labels: dict[str, str], words: list[list[str]]) -> None:
    # A tuple of text, and a dict's keys, fill an iterable of TrustedInstruction with text
    # (their arguments do not stand one for one with the iterable's); a list of lists not.
    each((reply, reply))  # type: ignore[arg-type]  # E: [veridic-forge] silenced mypy's arg-type
    each(labels)  # type: ignore[arg-type]  # E: [veridic-forge] silenced mypy's arg-type
    each(words)  # type: ignore[arg-type]
