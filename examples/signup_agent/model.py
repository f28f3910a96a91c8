"""A scripted model: deterministic, no network, and it only knows what the prompt tells it.

It plays the model of the article's traces. It reads the capability section
of the system message to learn which tools exist, reads the form submission
from its data block, asks ``get_tool_schema`` for the REST route's contract
instead of recalling it, and then plans:

- when the contract requires an argument the form lacks and the section lists
  the snippet tools: the six-step plan that generates the missing value with a
  Code Glue snippet;
- when the section says snippets are unavailable: the honest free-tier plan
  (the webhook created disabled) and a message that says why;
- with ``plans_from_memory=True`` it ignores what the section says about
  snippets and proposes the six-step plan anyway, like a model replaying a
  plan from a session when the extension still ran. That is the plan the
  normalizer must not thin silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from veridic import Prompt, unfence

__all__ = ["ModelCall", "ModelTurn", "ScriptedModel"]

WEBHOOK: Final = "cf7-new-user"
SNIPPET: Final = "generate-password"
CREDENTIAL: Final = "integration-bot"
FIELD_GUESSES: Final = {"username": "your-name", "email": "your-email", "name": "your-name"}
"""Route argument -> form field, the way a model matches names."""

_TOOL_LINE: Final = re.compile(r"^- ([A-Za-z0-9_-]{1,64}) \((?:query|write), ", re.MULTILINE)


@dataclass(frozen=True)
class ModelCall:
    """A tool call the model makes: an id, a tool name, its arguments."""

    id: str
    name: str
    arguments: Mapping[str, object]


@dataclass(frozen=True)
class ModelTurn:
    """One answer: text for the user, tool calls to run now, or a plan to review."""

    text: str = ""
    calls: tuple[ModelCall, ...] = ()
    plan: tuple[Mapping[str, object], ...] = field(default=())


class ScriptedModel:
    """Answers a :class:`~veridic.Prompt` the way the article's traces show."""

    def __init__(self, *, plans_from_memory: bool = False) -> None:
        self.plans_from_memory = plans_from_memory

    def respond(self, prompt: Prompt) -> ModelTurn:
        listed = set(_TOOL_LINE.findall(prompt.system))
        route = _route(prompt.system)
        contract = _block(prompt, "tool:get_tool_schema")
        if contract is None:
            return ModelTurn(calls=(ModelCall("call_1", "get_tool_schema", {"name": route}),))
        form = _form(prompt)
        required = [str(name) for name in _list(contract.get("required"))]
        mapping = {arg: src for arg, src in FIELD_GUESSES.items() if src in form}
        missing = [name for name in required if name not in mapping]
        snippets = {"create_snippet", "assign_snippet"} <= listed or self.plans_from_memory
        if not missing:
            return ModelTurn(
                "The form provides every required argument.", plan=_plan(route, mapping)
            )
        if snippets:
            text = (
                f"The route {route} requires {', '.join(missing)}, which the form does not "
                f"provide. A Code Glue snippet will generate it before each delivery."
            )
            return ModelTurn(text, plan=_plan(route, mapping, generate=missing[0]))
        text = (
            f"The route {route} requires {', '.join(missing)}, but your Contact Form 7 "
            f"submission does not provide it (it has {', '.join(sorted(form))}). "
            f"{_why_no_snippets(prompt.system)} So I cannot generate a {missing[0]} before "
            "dispatch: I will set the webhook up disabled, and it can go live once snippets "
            "are available."
        )
        return ModelTurn(text, plan=_plan(route, mapping, enabled=False)[:3])


def _plan(
    route: str, mapping: dict[str, str], *, generate: str | None = None, enabled: bool = True
) -> tuple[Mapping[str, object], ...]:
    steps: list[Mapping[str, object]] = [
        {
            "id": "step_1",
            "tool": "create_webhook",
            "arguments": {
                "name": WEBHOOK,
                "form": "contact-form-1",
                "route": route,
                "enabled": enabled,
            },
        },
        {
            "id": "step_2",
            "tool": "assign_credential",
            "arguments": {"webhook": WEBHOOK, "credential": CREDENTIAL},
            "depends_on": ["step_1"],
        },
        {
            "id": "step_3",
            "tool": "set_mapping",
            "arguments": {"webhook": WEBHOOK, "fields": mapping},
            "depends_on": ["step_1"],
        },
    ]
    last = ["step_2", "step_3"]
    if generate is not None:
        steps += [
            {
                "id": "step_4",
                "tool": "create_snippet",
                "arguments": {
                    "name": SNIPPET,
                    "sets_field": generate,
                    "code": "return wp_generate_password( 24 );",
                },
            },
            {
                "id": "step_5",
                "tool": "assign_snippet",
                "arguments": {"webhook": WEBHOOK, "snippet": SNIPPET},
                "depends_on": ["step_1", "step_4"],
            },
        ]
        last.append("step_5")
    steps.append(
        {
            "id": f"step_{len(steps) + 1}",
            "tool": "test_dispatch",
            "arguments": {"webhook": WEBHOOK},
            "depends_on": last,
        }
    )
    return tuple(steps)


def _route(system: str) -> str:
    for line in system.splitlines():
        found = _TOOL_LINE.match(line)
        if found is not None and "/wp/v2/users" in line:
            return found.group(1)
    return "create_user"  # what a model would recall; the contract read corrects it


def _why_no_snippets(system: str) -> str:
    for line in system.splitlines():
        if "snippets" in line.lower() and "not available" in line:
            head = line.removeprefix("- ").split(". ")[0]
            return head[0].upper() + head[1:] + "."
    return "This site cannot run code snippets."


def _blocks(prompt: Prompt) -> dict[str, str]:
    return {label: text for m in prompt.messages for label, text in unfence(m.content)}


def _block(prompt: Prompt, label: str) -> dict[str, object] | None:
    text = _blocks(prompt).get(label)
    if text is None:
        return None
    loaded = json.loads(text)
    return {str(k): v for k, v in loaded.items()} if isinstance(loaded, dict) else None


def _form(prompt: Prompt) -> dict[str, str]:
    for label, text in _blocks(prompt).items():
        if label.startswith("cf7:"):
            loaded = json.loads(text)
            if isinstance(loaded, dict):
                return {str(k): str(v) for k, v in loaded.items()}
    return {}


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []
