"""A Literal type that came from Any is not code text (veridic-any where it is filled,
veridic-literal where it reaches an instruction position)."""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypedDict, cast

from pydantic import BaseModel

from veridic import TrustedInstruction, instruction

Mode = Literal["short", "long"]


@dataclass
class Config:
    mode: Mode


class Settings(TypedDict):
    mode: Mode


class Pair(NamedTuple):
    mode: Mode


class Validated(BaseModel):
    mode: Mode


def pick(mode: Mode) -> TrustedInstruction:
    return instruction(mode)


def filled_from_any(raw: str, data: Any) -> None:
    Config(**data)  # E: [veridic-any] which is typed Literal
    Config(mode=data["mode"])  # E: [veridic-any] Config() got a value of type "Any" for "mode"
    Pair(data)  # E: [veridic-any] Pair() got a value of type "Any"
    pick(json.loads(raw))  # E: [veridic-any] pick() got a value of type "Any" for "mode"
    Validated(**data)
    Validated.model_validate(data)


def read_after_any(raw: str, data: Any) -> list[TrustedInstruction]:
    settings: Settings = json.loads(raw)
    config = Config(**data)  # E: [veridic-any] which is typed Literal
    built = Settings(mode=data)
    mode: Mode = data
    forced = cast(Mode, raw)
    return [
        instruction(settings["mode"]),  # E: [veridic-literal] typed Literal but filled by
        instruction(config.mode),  # E: [veridic-literal] built into "config"
        instruction(built["mode"]),  # E: [veridic-literal] built into "built"
        instruction(mode),  # E: [veridic-literal] the variable "mode", typed Literal
        instruction(forced),  # E: [veridic-literal] the variable "forced"
        instruction(cast(Mode, raw)),  # E: [veridic-literal] a cast()
    ]


def cast_into_parameters(raw: str, data: Any) -> list[TrustedInstruction]:
    # A Literal parameter is read as code text in its function: a cast() there, or a
    # variable that took one or took Any, fills it with whatever the outside sent.
    loose: Mode = data
    forced = cast(Mode, raw)
    config = Config(mode=cast(Mode, raw))  # E: [veridic-literal] Config() got a cast() for "mode"
    Pair(forced)  # E: [veridic-literal] Pair() got the variable "forced" (filled by a cast()
    return [
        pick(cast(Mode, raw)),  # E: [veridic-literal] pick() got a cast() for "mode"
        pick(loose),  # E: [veridic-literal] (filled by a value of type "Any" assigned to "loose")
        pick(forced),  # E: [veridic-literal] (filled by a cast() assigned to "forced")
        instruction(config.mode),
    ]


def unpacked(flag: bool) -> list[TrustedInstruction]:
    mode: Mode
    if flag:
        name, mode = "brief", "short"
    else:
        name, mode = "full", "long"
    return [pick(mode), instruction(mode), instruction(name)]  # E: [veridic-literal] "name"


def from_code(flag: bool, validated: Validated) -> list[TrustedInstruction]:
    settings: Settings = {"mode": "short"}
    config = Config(mode="long")
    mode: Mode = "short" if flag else "long"
    return [
        instruction(settings["mode"]),
        instruction(config.mode),
        instruction(mode),
        instruction(validated.mode),
        pick("short"),
    ]


# A cast() to a Literal returned from a function declared to return one: its callers
# (pick(to_mode(raw)), instruction(to_mode(raw))) read the value as code text.
def to_mode(raw: str) -> Mode:
    return cast(Mode, raw)  # E: [veridic-literal] a cast() to "Literal['short', 'long']"


def maybe_mode(raw: str, known: bool) -> Mode | None:
    forced = cast(Mode, raw)  # E: [veridic-literal] returned from maybe_mode()
    return forced if known else None


def load(raw: str) -> Settings:
    return cast(Settings, json.loads(raw))  # E: [veridic-literal] returned from load()


# Returned as str, written in code, or looked up in a mapping written in code: clean.
def as_text(raw: str) -> str:
    return cast(Mode, raw)


def checked(raw: str) -> Mode:
    if raw == "short":
        return "short"
    return "long"


MODES: dict[str, Mode] = {"short": "short", "long": "long"}


def looked_up(raw: str) -> Mode:
    return MODES[raw]


# model_construct() and model_copy(update=...) store values unvalidated: a Literal field
# takes only text written in code there.
def unvalidated(
    raw: str, mode: Mode, validated: Validated, data: dict[str, str]
) -> list[Validated]:
    return [
        Validated.model_construct(mode=raw),  # E: [veridic-literal] got the parameter "raw" for
        validated.model_copy(update={"mode": raw}),  # E: [veridic-literal] Validated.model_copy()
        validated.model_copy(update=data),  # E: [veridic-literal] a mapping that may fill
        Validated.model_construct(mode="short"),
        Validated.model_construct(mode=mode),
        validated.model_copy(update={"mode": mode}),
        validated.model_copy(),
        Validated(mode=mode),
        # dict(key=value) is read key by key, as a display is.
        validated.model_copy(update=dict(mode=mode)),  # noqa: C408 (the spelling under test)
        # E: [veridic-literal] Validated.model_copy()
        validated.model_copy(update=dict(mode=raw)),  # noqa: C408 (the spelling under test)
    ]


class Call(TypedDict):
    name: str
    type: Literal["tool_call"]


class Message(BaseModel):
    calls: list[Call]
    kind: Literal["ai"] | None = None


# A Literal nested in a container is not followed: copying a message with new calls (as
# LangChain middleware copies an AIMessage) stays clean; a field typed Optional[Literal]
# is one.
def copied(message: Message, calls: list[Call], raw: str) -> list[Message]:
    return [
        message.model_copy(update={"calls": calls}),
        message.model_copy(update={"kind": raw}),  # E: [veridic-literal] Message.model_copy()
    ]


class Loaded:
    def __init__(self, raw: str) -> None:
        self.raw = raw

    @property
    def mode(self) -> Mode:
        return cast(Mode, self.raw)  # E: [veridic-literal] returned from mode()

    @staticmethod
    def parse(raw: str) -> Mode:
        return cast(Mode, raw)  # E: [veridic-literal] returned from parse()


def generated(raw: str) -> Iterator[Mode]:
    yield cast(Mode, raw)  # E: [veridic-literal] yielded by generated()
    yield "short"


# A cast() to a Literal stored where other modules read it (settings.MODE, config.mode).
MODE: Mode = cast(Mode, json.loads("{}"))  # E: [veridic-literal] stored in "literal_data.MODE"


class Cached:
    mode: Mode = cast(Mode, json.loads("{}"))  # E: [veridic-literal] "literal_data.Cached.mode"

    def __init__(self, raw: str) -> None:
        self.other: Mode = cast(Mode, raw)  # E: [veridic-literal] stored in the attribute "other"
        self.kept = cast(str, json.loads(raw))  # a str: read as a variable, not as code text
