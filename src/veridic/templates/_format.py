"""``str.format`` and ``str.format_map`` in a template shipped with the code.

The format string may be a value, and a value may come from outside (a ticket, a
CRM row). Python's own formatter reads whatever its fields name:
``"{0.__class__.__init__.__globals__}".format(customer)`` wrote a module's globals,
``os.environ`` with them, into the prompt, and ``"{0:>999999999}"`` asked for a
gigabyte. A template's ``x.format`` and ``x.format_map`` of text (however it reaches
them: ``x["format"]``, ``x | attr("format")``, a ``{% set %}``) are these instead:
Python's formatter, reading attributes as jinja2's sandbox does (no ``_`` name, no
internal attribute such as a generator's ``gi_frame``), refusing a width or precision
over 100,000, and a field whose text would be a memory address. A stored template's
sandbox refuses ``.format`` whole (it has ``|format``).

The ``%`` formats (``text % values``, ``|format``) read no attributes, but a width from
outside (``"%2000000s"``) made two million characters: :func:`checked_printf` refuses a
width or precision over 100,000, or one taken from the values (``*``), as the sandbox's
``%`` does, and widths and precisions over 100,000 in all for the fields of one
format (``"%(k)100000s"`` twenty times over one mapping's value).
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]  # str.format's own parser of fields; typeshed has no stub
import re
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from jinja2.exceptions import SecurityError
from jinja2.filters import do_format
from jinja2.sandbox import MAX_RANGE, is_internal_attribute

from veridic._sample import clip
from veridic._words import a_type
from veridic.errors import TemplateError
from veridic.templates._bounds import check_binop
from veridic.templates._runtime import (
    SCALARS,
    check_written,
    cut,
    handed_out,
    refuse_address,
    template_line,
)

__all__ = ["FORMATTERS", "checked_format", "checked_printf", "printf_filter"]

FORMATTERS: Final = frozenset({"format", "format_map"})
"""``str``'s methods that run their text as a format string."""
_WIDEST: Final = MAX_RANGE
"""The widest width or precision a format field may ask for (the sandbox's bound)."""
_NUMBER: Final = re.compile(r"\d+")
_REPRS: Final = frozenset({"r", "a"})
"""Conversions that write a value's ``repr``."""


def checked_format(text: str, method: str, *, instruction: bool) -> Callable[..., str]:
    """What a template gets for ``text.format`` or ``text.format_map`` (``method``); in
    an ``instruction`` template, a field that reads untrusted text is refused."""
    formatter = _Formatter(instruction=instruction)
    if method == "format_map":

        def format_map(mapping: Mapping[str, Any], /) -> str:
            return formatter.vformat(text, (), mapping)

        return format_map

    def format(*args: Any, **kwargs: Any) -> str:
        return formatter.vformat(text, args, kwargs)

    return format


def checked_printf(text: object) -> object:
    """``text``, the left of a ``%`` or the input of ``|format`` in a shipped template,
    once its widths are checked (anything but text is given back as it is).

    Raises:
        TemplateError: a width or precision over 100,000 (in all, for the fields of one
            format), or one given by ``*``.
    """
    if isinstance(text, str):
        try:
            check_binop("%", text, ())
        except SecurityError as error:
            template, line = template_line()
            raise TemplateError(
                f"template {template!r}{line} formats with %: {cut(str(error), 300)}; a format "
                "string may "
                "be a value from outside, and Python would make text that long: write the "
                "format in the template"
            ) from None
    return text


def printf_filter(value: Any, *args: object, **kwargs: object) -> str:
    """jinja2's ``|format``, its format string's widths checked (:func:`checked_printf`)."""
    checked_printf(value)
    return do_format(value, *args, **kwargs)


class _Formatter(string.Formatter):
    """Python's formatter, reading fields as jinja2's sandbox reads attributes."""

    def __init__(self, *, instruction: bool) -> None:
        self._instruction = instruction

    def vformat(self, format_string: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        self._asked = 0  # the widths and precisions this format asked for, in all
        return super().vformat(format_string, args, kwargs)

    def get_field(
        self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[Any, str | int]:
        first, rest = _string.formatter_field_name_split(field_name)
        value = self.get_value(first, args, kwargs)
        for is_attribute, name in rest:
            if is_attribute and isinstance(name, str):
                if name.startswith("_") or is_internal_attribute(value, name):
                    raise _internal(field_name, name, value)
                value = getattr(value, name)
            else:
                value = value[name]
        return value, first

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        """The field's value, checked before ``!r``, ``!s`` or ``!a`` makes text of it:
        in an instruction template, untrusted text (read through a field's attributes,
        which no check of the template's saw) and a value whose own code writes it
        (``check_written``); and text that would be an address (``!r`` writes what a list
        would: an item's ``repr``)."""
        if self._instruction:
            handed_out(value, template_line, "formats a field holding")
            if type(value) not in SCALARS:
                check_written(value, template_line, "formats a field holding")
        if type(value) not in SCALARS:
            refuse_address(value, template_line, "formats", item=conversion in _REPRS)
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        for number in _NUMBER.findall(format_spec):
            self._asked += int(number) if len(number) <= 6 else _WIDEST + 1
            if self._asked > _WIDEST:
                template, line = template_line()
                raise TemplateError(
                    f"template {template!r}{line} runs a format string whose field asks for a "
                    f"width or precision of {clip(number, 20)}, more than {_WIDEST:,} with "
                    "those of the fields before it: a format string may be a value from "
                    "outside, and Python would make text that long; write the format in the "
                    "template, at most that wide in all"
                )
        text = format(value, format_spec)
        if self._instruction and type(text) is not str:  # __format__ returned it as is
            check_written(text, template_line, f"formats a field holding {a_type(value)} as")
        return text


def _internal(field_name: str, name: str, value: object) -> TemplateError:
    template, line = template_line()
    return TemplateError(
        f"template {template!r}{line} runs a format string whose field {clip(field_name, 40)} "
        f"reads {clip(name, 40)} of {a_type(value)}, one of Python's own attributes or "
        "internals (a format string may be a value from outside, and these lead to a "
        "module's globals, os.environ among them): name the values the text needs "
        '("{name}".format(name=customer.name)), or write the text in the template'
    )
