"""Method hook: trusted ``+`` trusted stays ``TrustedInstruction``, as at run time.

Hook: ``get_method_hook`` for ``veridic.text.provenance.TrustedInstruction.__add__``
(mypy names the method after the type of the left operand, although ``str``
defines it; a plain ``str`` on the left never gives a trusted result).

What it changes: the type of ``a + b`` (and ``a += b``) when both operands are
``TrustedInstruction``: ``TrustedInstruction`` instead of ``str``. Every other
combination keeps mypy's ``str``.

Why: the run-time rules in ``veridic.text.provenance`` keep the brand on exactly
two compositions, ``+`` of two trusted values and ``join()`` of trusted parts
(``join()`` is typed so already); everything else (mixing in untrusted or
plain text, f-strings, ``%``, ``.format()``, ``str.join``, slicing,
``.upper()``) gives a plain ``str``. Without the hook, mypy would call the
sum of two instructions a ``str`` and refuse it in ``Composer.system()``,
although the run time accepts it. ``tests/test_static_runtime_agreement.py``
pins that the two agree on every operation.
"""

from __future__ import annotations

from mypy.plugin import MethodContext
from mypy.types import Type, get_proper_type

from veridic.mypy._signature import is_trusted_instance


def check(ctx: MethodContext) -> Type:
    """``TrustedInstruction + TrustedInstruction`` is ``TrustedInstruction``."""
    left = get_proper_type(ctx.type)
    rights = ctx.arg_types[0] if ctx.arg_types else []
    if len(rights) == 1 and is_trusted_instance(left) and is_trusted_instance(rights[0]):
        return left
    return ctx.default_return_type
