"""``BootError``, and what a failed boot check may tell the model.

The capability section, an instruction position, says why a component did not
start, and an exception's message is outside text whenever it was built from
outside text. Which part of an exception may be shown there, and which only
logged, is a rule about exceptions, apart from registering tools and running
the checks (:class:`~veridic.Registry`, which imports it from here).
"""

from __future__ import annotations

import re
import sys
from typing import Final

from veridic._sample import error_message, named
from veridic.errors import VeridicError
from veridic.text.provenance import TrustedText, is_untrusted, refuse_untrusted
from veridic.tools._descriptions import one_line

__all__ = ["BootError"]

_TYPE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,59}(\.[A-Za-z_][A-Za-z0-9_]{0,59}){0,3}")


class BootError(VeridicError):
    """Raised by a component's boot check to say, in code, why the component did not start.

    A failed boot is told to the model in the capability section, an
    instruction position, and an exception's message is outside text whenever
    it was built from outside text (an f-string with a server's reply, a
    pydantic ``ValidationError`` quoting its input, a ``KeyError`` of a
    stripped reply). So the section shows only the ``reason`` given here,
    written in code, or else the exception's type; the whole message goes to
    the log and to :meth:`~veridic.Registry.components`.

    >>> def check_core() -> None:
    ...     raise BootError("requires core >= 2.3")
    """

    def __init__(self, reason: TrustedText, /) -> None:
        refuse_untrusted(reason, "BootError(reason)", "write the reason in code")
        super().__init__(reason)
        self.reason: str = reason


def _boot_reason(error: Exception) -> str:
    """What the capability section (an instruction position) says of a failed boot.

    An exception's message is outside text whenever it was built from outside
    text (an f-string with a licence server's reply, a pydantic
    ``ValidationError`` quoting its input, a ``KeyError`` of a stripped reply),
    and no brand survives the formatting. So the message is shown only when it
    is code: the reason of a :class:`BootError`, or a string literal of the
    code that raised the exception (``raise RuntimeError("requires core >=
    2.3")``: the very constant object of that function's code, not an equal
    string). Otherwise the section names the exception's type, when the type
    is a class defined in a module (a class made at run time may carry any
    name), and the message goes to the log and the state's ``detail`` only.
    """
    if isinstance(error, BootError) and not is_untrusted(error.reason):
        return one_line(error.reason) or "its boot check raised BootError"
    literal = _literal_message(error)
    if literal is not None and one_line(literal):
        return one_line(literal)
    kind = type(error)
    module = sys.modules.get(kind.__module__)
    importable = (
        _TYPE_NAME.fullmatch(kind.__qualname__) is not None
        and module is not None
        and _lookup(module, kind.__qualname__) is kind
    )
    shown = str.__str__(kind.__qualname__) if importable else "an exception"
    return f"its boot check raised {shown}"


def _literal_message(error: Exception) -> str | None:
    """``error``'s message when it is a string constant of the code that raised it."""
    if (
        len(error.args) != 1
        or type(error.args[0]) is not str
        or error_message(error) != error.args[0]
    ):
        return None
    message: str = error.args[0]
    trace = error.__traceback__
    if trace is None:
        return None
    while trace.tb_next is not None:
        trace = trace.tb_next
    constants = trace.tb_frame.f_code.co_consts
    return message if any(constant is message for constant in constants) else None


def _boot_detail(error: BaseException) -> str:
    """The whole message of a failed boot, for the log and :meth:`~veridic.Registry.components`,
    with what caused it (a ``BootError`` raised ``from`` the error that explains it)."""
    kind, message = named(type(error).__qualname__), error_message(error)
    told = f"{kind}: {message}" if message else kind
    cause = error.__cause__
    return told if cause is None else f"{told} (caused by {_boot_detail(cause)})"


def _lookup(module: object, qualname: str) -> object:
    found: object = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found
