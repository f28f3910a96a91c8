"""Any bound by a for, with or case target declared to hold trusted text, in a module that
makes no call (no call hook runs here: the end of the module's check finds them)."""

from typing import Any

from _stores import Prompts

from veridic import TrustedInstruction


def bound(loose: Any, prompts: Prompts) -> None:
    prompt: TrustedInstruction
    # E: [veridic-any] the name "prompt" is declared
    for prompt in loose:  # noqa: B007 (the binding is the case)
        pass
    with loose as prompt:  # E: [veridic-any] what "with" enters of the variable "loose"
        pass
    match loose:
        case [prompt]:  # E: [veridic-any] a capture of the variable "loose"
            pass
        case _:
            pass
    # E: [veridic-any] the name "prompt" is declared
    for prompt in prompts.loaded:  # noqa: B007 (the binding is the case)
        pass


class Holder:
    @staticmethod
    def held(prompt: TrustedInstruction = Prompts.fallback) -> None:  # E: [veridic-any] default
        pass
