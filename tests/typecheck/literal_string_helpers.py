"""Calls of any function with a LiteralString parameter are checked like instruction()."""

from typing import Final, LiteralString

from _helpers import rule as shared_rule

from veridic import TrustedInstruction, instruction, join


def rule(text: LiteralString) -> TrustedInstruction:
    return instruction(text)


def rules(*texts: LiteralString) -> list[TrustedInstruction]:
    return [instruction(text) for text in texts]


def rules_by_name(*texts: LiteralString) -> dict[str, TrustedInstruction]:
    return {text: instruction(text) for text in texts}


def rules_in_a_loop(*texts: LiteralString) -> list[TrustedInstruction]:
    minted = []
    for text in texts:
        minted.append(instruction(text))
    return minted


def rules_from_a_display() -> list[TrustedInstruction]:
    return [instruction(text) for text in ("Be brief.", "Cite sources.")]


RULES: Final = ("Be brief.", "Cite sources.")
RULE_LIST: Final = ["Be brief.", "Cite sources."]


def rules_from_a_final_tuple() -> list[TrustedInstruction]:
    return [instruction(text) for text in RULES]


def rules_from_a_final_list() -> list[TrustedInstruction]:
    # P: [reportArgumentType]
    return [instruction(text) for text in RULE_LIST]  # E: [veridic-literal] the variable "text"


def loop_variable_bound_again(*texts: LiteralString) -> list[TrustedInstruction]:
    minted = []
    for text in texts:
        text = text.upper()
        minted.append(instruction(text))  # E: [veridic-literal] the variable "text"
    return minted


def star_parameter_bound_again(name: str, *texts: LiteralString) -> list[TrustedInstruction]:
    # P: [reportAssignmentType]
    texts = (name,)
    return [instruction(text) for text in texts]  # E: [veridic-literal] the variable "text"


def display_with_outside_text(name: str) -> list[TrustedInstruction]:
    # P: [reportArgumentType]
    return [instruction(text) for text in ("Be brief.", name)]  # E: [veridic-literal] "text"


def loop_over_a_list_of_str(names: list[str]) -> list[TrustedInstruction]:
    # P: [reportArgumentType]
    return [instruction(text) for text in names]  # E: [veridic-literal] the variable "text"


def maybe(text: LiteralString | None = None) -> TrustedInstruction:
    return instruction("default") if text is None else instruction(text)


class Persona:
    def __init__(self, role: LiteralString) -> None:
        self.instruction = instruction(role)

    def say(self, text: LiteralString) -> TrustedInstruction:
        return instruction(text)

    @staticmethod
    def shout(text: LiteralString) -> TrustedInstruction:
        return instruction(text)


def callers(name: str, names: list[str], options: dict[str, object]) -> None:
    rule("written in code")
    # P: [reportArgumentType]
    rule(name)  # E: [veridic-literal] rule() takes text written in code for "text"
    shared_rule("from another module, maybe read back from mypy's cache")
    # P: [reportArgumentType]
    shared_rule(name)  # E: [veridic-literal] rule() takes text written in code for "text"
    rules("one", "two")
    rules(*("one", "two"))
    # P: [reportArgumentType]
    rules(*names)  # E: [veridic-literal] the parameter "names", unpacked
    # P: [reportArgumentType]
    rules(*("one", name))  # E: [veridic-literal] the parameter "name"
    # P: [reportArgumentType]
    Persona(**options)  # E: [arg-type]
    # P: [reportArgumentType]
    rules("one", name)  # E: [veridic-literal] rules() takes text written in code
    maybe()
    maybe(None)
    maybe("written")
    # P: [reportArgumentType]
    maybe(name)  # E: [veridic-literal] maybe()
    Persona("a support agent").say("hi")
    # P: [reportArgumentType]
    Persona(name)  # E: [veridic-literal] Persona() takes text written in code for "role"
    # P: [reportArgumentType]
    Persona("agent").say(name)  # E: [veridic-literal] Persona.say()
    # P: [reportArgumentType]
    Persona.shout(name)  # E: [veridic-literal] Persona.shout()
    # P: [reportArgumentType]
    join([rule("a")], sep=name)  # E: [veridic-literal] join() takes text written in code for "sep"
