"""Bounds on what a stored template's operators make, so that one stored row cannot hang a worker.

jinja2's sandbox keeps a stored template away from Python's internals and bounds
``range`` (to 100,000 items), but ``**``, ``*`` and ``%`` run as Python runs them,
and jinja2 folds a constant expression when the template compiles, before anything
renders: ``{{ 9 ** (9 ** 9) }}`` spends minutes of a core inside one big-integer
power, which no timeout can interrupt, and ``{{ "x" * 10 ** 10 }}`` asks for 10 GB.
The sandboxed environment intercepts these three operators (jinja2's documented hook,
which also stops their folding), and each refuses a result past a bound with a
``SecurityError``, which the render reports as a
:class:`~veridic.errors.TemplateSandboxError`:

- ``a ** b`` and ``a * b`` of integers: more than 14,300 bits (about 4,300 digits,
  the most Python writes as text, so nothing larger could reach a prompt);
- a string, list or tuple repeated by ``*``: more than 100,000 characters or items
  (the sandbox's bound on a range);
- ``text % values`` and the ``|format`` filter: a width or precision over 100,000,
  or one taken from the values (``*``).
"""

from __future__ import annotations

import re
from typing import Final

from jinja2.exceptions import SecurityError
from jinja2.filters import do_format
from jinja2.sandbox import MAX_RANGE

__all__ = ["INTERCEPTED", "bounded_format", "check_binop"]

INTERCEPTED: Final = frozenset({"**", "*", "%"})
"""The operators the sandboxed environment hands to :func:`check_binop` first."""

_LARGEST_BITS: Final = 14_300
_LONGEST: Final = MAX_RANGE
_PRINTF: Final = re.compile(r"%%|%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def check_binop(operator: str, left: object, right: object) -> None:
    """Refuse ``left operator right`` when its result would pass a bound (see the module).

    Raises:
        SecurityError: the result would be too large; nothing was computed.
    """
    if operator == "**":
        _check_power(left, right)
    elif operator == "*":
        _check_product(left, right)
    elif operator == "%" and isinstance(left, str):
        _check_printf(left)


def bounded_format(value: object, *args: object, **kwargs: object) -> str:
    """jinja2's ``|format`` filter, with the bounds of ``%`` on its widths.

    Raises:
        SecurityError: a width or precision is over 100,000 or given by ``*``.
    """
    _check_printf(str(value))
    return do_format(str(value), *args, **kwargs)


def _check_power(base: object, exponent: object) -> None:
    if not isinstance(base, int) or not isinstance(exponent, int):
        return
    if exponent <= 0 or abs(base) <= 1:
        return
    if (abs(base).bit_length() - 1) * exponent > _LARGEST_BITS:
        raise SecurityError(
            f"a power of integers ({base.bit_length()}-bit base, exponent of "
            f"{exponent.bit_length()} bits) would have more than {_LARGEST_BITS:,} bits, more "
            "digits than Python writes as text"
        )


def _check_product(left: object, right: object) -> None:
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > _LARGEST_BITS + 1:
            raise SecurityError(
                f"a product of integers would have more than {_LARGEST_BITS:,} bits, more "
                "digits than Python writes as text"
            )
        return
    for repeated, times in ((left, right), (right, left)):
        if not isinstance(repeated, str | list | tuple) or not isinstance(times, int):
            continue
        if len(repeated) * times > _LONGEST:
            raise SecurityError(
                f"a {type(repeated).__name__} of {len(repeated):,} repeated {times:,} "
                f"times would be longer than {_LONGEST:,}"
            )


def _check_printf(text: str) -> None:
    for match in _PRINTF.finditer(text):
        for size in match.groups():
            if size is None:
                continue
            if size == "*":
                raise SecurityError(
                    f"the format {match.group()!r} takes its width or precision from the "
                    "values (*): write it in the format, at most "
                    f"{_LONGEST:,}"
                )
            if len(size) > 6 or int(size) > _LONGEST:
                raise SecurityError(
                    f"the format {match.group()[:20]!r} asks for a width or precision over "
                    f"{_LONGEST:,}"
                )
