"""``render`` is checked by mypy: a template is generic in its parameter type.

The typed calls below are checked by the project's own mypy run (this file is
in its ``files``); :func:`test_mypy_rejects_render_calls_that_break_the_parameter_type`
runs mypy on a snippet of wrong calls and pins the errors it reports.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Final, TypedDict

from mypy import api as mypy_api
from pydantic import BaseModel

from veridic import (
    Composer,
    DataTemplate,
    InstructionField,
    InstructionTemplate,
    Prompt,
    Templates,
    TrustedInstruction,
    UntrustedText,
    instruction,
    untrusted,
)

ROOT: Final = Path(__file__).resolve().parents[1]
FIXTURES: Final = ROOT / "tests" / "templates_fixtures"
CACHE: Final = (
    Path(os.environ["VERIDIC_TYPECHECK_CACHE"]).with_name("templates-tests")
    if os.environ.get("VERIDIC_TYPECHECK_CACHE")
    else ROOT / ".mypy_cache" / "templates-tests"
)
"""mypy's cache (next to ``VERIDIC_TYPECHECK_CACHE`` when that is set, as in test_typecheck)."""


class System(TypedDict):
    persona: TrustedInstruction
    rules: list[TrustedInstruction]


class Ticket(BaseModel):
    customer: str
    subject: str
    body: str


class Persona(BaseModel):
    persona: InstructionField


TEMPLATES: Final = Templates(FIXTURES)
SYSTEM: Final[InstructionTemplate[System]] = TEMPLATES.instruction("system.j2", params=System)
TICKET: Final[DataTemplate[Ticket]] = TEMPLATES.data("ticket.j2", params=Ticket)


def build(body: UntrustedText) -> Prompt:
    """A typed pipeline: every call below is checked against the parameter types."""
    system: TrustedInstruction = SYSTEM.render(
        {"persona": instruction("Ava"), "rules": [instruction("Cite.")]}
    )
    turn: UntrustedText = TICKET.render(Ticket(customer="Ann", subject="Help", body=body))
    return Composer().system(system).user(turn).build()


def test_typed_render_calls_compose_a_prompt() -> None:
    prompt = build(untrusted("Printer on fire", source="ticket:1"))
    assert [message.role for message in prompt.messages] == ["system", "user"]


def test_mypy_rejects_render_calls_that_break_the_parameter_type(tmp_path: Path) -> None:
    snippet = tmp_path / "wrong_calls.py"
    snippet.write_text(
        textwrap.dedent(
            f"""\
            from typing import TypedDict
            from pydantic import BaseModel
            from veridic import Templates, TrustedInstruction, UntrustedText, untrusted

            class System(TypedDict):
                persona: TrustedInstruction
                rules: list[TrustedInstruction]

            class Ticket(BaseModel):
                customer: str
                subject: str
                body: str

            templates = Templates({str(FIXTURES)!r})
            system = templates.instruction("system.j2", params=System)
            ticket = templates.data("ticket.j2", params=Ticket)
            body = untrusted("x", source="t")
            system.render({{"persona": body, "rules": []}})
            system.render({{"persona": TrustedInstruction("x")}})
            ticket.render({{"customer": "a", "subject": "b", "body": "c"}})
            text: TrustedInstruction = ticket.render(Ticket(customer="a", subject="b", body=body))
            """
        )
    )
    out, err, _ = mypy_api.run(
        [
            str(snippet),
            "--strict",
            "--config-file=",
            f"--cache-dir={CACHE}",
            "--no-error-summary",
            "--show-error-codes",
        ]
    )
    reported = sorted(
        (int(line.split(":")[1]), line.rsplit("[", 1)[-1].rstrip("]"))
        for line in out.splitlines()
        if ": error:" in line
    )
    assert reported == [
        (18, "typeddict-item"),  # untrusted text where the template needs TrustedInstruction
        (19, "typeddict-item"),  # a key of the parameter type is missing
        (20, "arg-type"),  # a dict where the template is bound to a model
        (21, "assignment"),  # a data template's output is not an instruction
    ], out + err
