"""mypy's own errors about a brand get a note saying how to mint, or where the text belongs.

An N mark (see tests/typecheck/README.md) pins a note below the error with that code.
"""

from veridic import Composer, TrustedInstruction, UntrustedText, instruction, join


def notes(text: str, u: UntrustedText, t: TrustedInstruction) -> TrustedInstruction:
    # P: [reportArgumentType]
    # E: [arg-type] expected "TrustedInstruction"
    # N: [arg-type] minted, not converted
    Composer().system(text)
    # P: [reportArgumentType]
    # E: [arg-type] "UntrustedText"
    # N: [arg-type] place it as data with Composer.data
    Composer().system(t, u)
    # P: [reportArgumentType]
    # E: [list-item] expected "TrustedInstruction"
    # N: [list-item] instruction("...")
    join([t, text])
    # P: [reportArgumentType]
    # E: [arg-type] expected "UntrustedText"
    # N: [arg-type] untrusted(text, source=
    Composer().data("ticket", text)
    # P: [reportAssignmentType]
    # E: [assignment] variable has type "TrustedInstruction"
    # N: [assignment] join() trusted parts
    prompt: TrustedInstruction = text
    # P: [reportAssignmentType]
    # E: [assignment] expression has type "UntrustedText"
    # N: [assignment] Composer.user(text)
    prompt = u
    Composer().system(t, instruction("Be brief."), prompt)
    # P: [reportReturnType]
    # E: [return-value] expected "TrustedInstruction"
    # N: [return-value] TrustPolicy("name").vouch
    return text


def by_name(texts: dict[str, TrustedInstruction]) -> None:
    Composer().system(*texts.values())


def notes_in_containers(labels: dict[str, str]) -> None:
    # P: [reportArgumentType]
    # E: [arg-type] expected "dict[str, TrustedInstruction]"
    # N: [arg-type] minted, not converted
    by_name(labels)


def notes_in_a_tuple(text: str) -> None:
    # P: [reportArgumentType]
    # E: [arg-type] expected "Iterable[TrustedInstruction]"
    # N: [arg-type] minted, not converted
    join((text, text))


def no_note(text: str) -> int:
    # P: [reportReturnType]
    return text  # E: [return-value] expected "int"


def ignore_of_another_code(text: str) -> TrustedInstruction:
    # A "type: ignore" of another code leaves mypy's error standing, with mypy's note
    # that the ignore does not cover it: the how-to note is still there.
    # E: [arg-type] expected "TrustedInstruction" # E: [unused-ignore] Unused "type: ignore"
    # N: [arg-type] minted, not converted
    Composer().system(text)  # type: ignore[misc]
    # E: [return-value] expected "TrustedInstruction" # E: [unused-ignore] Unused "type: ignore"
    # N: [return-value] TrustPolicy("name").vouch
    return text  # type: ignore[misc]
