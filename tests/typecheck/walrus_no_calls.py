"""Any bound by a walrus to a name declared to hold trusted text, in a module that makes no
call and binds nothing else (no call hook runs here, and no statement of it says that the
end of its check should look: the walrus is an expression)."""

from typing import Any

from veridic import TrustedInstruction


def walrus(loose: Any, prompt: TrustedInstruction) -> None:
    # E: [veridic-any] the name "prompt" is declared
    if prompt := loose:  # noqa: F841 (the binding is the case)
        pass
    fallback: TrustedInstruction
    # E: [veridic-any] the name "fallback" is declared
    while fallback := loose:  # noqa: F841 (the binding is the case)
        pass


def accepted(given: TrustedInstruction, other: TrustedInstruction) -> TrustedInstruction:
    if chosen := given or other:
        return chosen
    return other
