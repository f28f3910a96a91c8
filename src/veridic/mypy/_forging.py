"""Call hook: the brands' NewType constructors are veridic's alone.

Hook: ``get_function_hook`` for ``veridic.provenance.TrustedInstruction`` and
``veridic.provenance.UntrustedText`` (a call of a NewType is a call of its
class, and mypy reports the class's full name).

What it changes: nothing in the inferred type. Outside the ``veridic``
package it reports ``veridic-forge`` with what to call instead.

Why: a NewType's constructor accepts any ``str`` and is the identity at run
time, so ``TrustedInstruction(user_text)`` satisfies mypy while carrying no
provenance; the composer then refuses it at run time, and the two checks
disagree. Inside veridic the constructors wrap values that were minted.

Not seen: the constructor passed as a value (``map(TrustedInstruction, xs)``)
and ``typing.cast`` to a brand. No plugin hook sees a ``cast``; ``veridic
hatches`` lists both, and the run-time check refuses the values.
"""

from __future__ import annotations

from mypy.checker import TypeChecker
from mypy.plugin import FunctionContext
from mypy.types import Type

from veridic.mypy import _names, errorcodes

_ADVICE = {
    _names.TRUSTED: (
        "TrustedInstruction(...) forges trust outside veridic: the NewType constructor accepts "
        "any str and records no provenance, so the composer refuses the value at run time; "
        'mint trusted text with instruction("..."), read it from an InstructionField, join() '
        'trusted parts, or vouch for it with TrustPolicy("name").vouch(text, reason=...)'
    ),
    _names.UNTRUSTED: (
        "UntrustedText(...) brands text outside veridic without saying where it came from, "
        "so no error or audit can name its source; brand outside text with "
        'untrusted(text, source="...")'
    ),
}


def check(fullname: str, ctx: FunctionContext) -> Type:
    """Report a brand constructor called outside veridic."""
    api = ctx.api
    if isinstance(api, TypeChecker) and not _names.in_package(api.tree.fullname):
        api.fail(_ADVICE[fullname], ctx.context, code=errorcodes.FORGE)
    return ctx.default_return_type
