"""Call hook: ``TrustPolicy`` names are written in code, and listed when a list is configured.

Hook: ``get_function_hook`` for ``veridic.trust_policy.TrustPolicy`` (creating
a policy is a call of the class).

What it changes: nothing in the inferred type. It reports ``veridic-policy``
when the name is not known in the code (a variable, a ``LiteralString``
parameter, anything but a literal, a ``Final`` constant or a ``Literal[...]``
value), when it is empty, and, with ``[tool.veridic] trust-policies``
configured, when a possible value of the name is not in the list. An ``Any``
name is ``veridic-any``.

Why: a trust policy is an escape hatch. The run time refuses an unlisted name
when the policy is created, which may be long after review; the plugin moves
that to the type check, and a name written where the policy is made is one
that review (and ``veridic hatches``) can see. That is stricter than the
run time, which accepts any name when no list is configured.
"""

from __future__ import annotations

from mypy.checker import TypeChecker
from mypy.plugin import FunctionContext
from mypy.types import Type

from veridic.mypy import errorcodes
from veridic.mypy._any_guard import any_value
from veridic.mypy._code_text import AnyTyped, NotWritten, classify, describe
from veridic.mypy._config import PolicySettings


def check(settings: PolicySettings, ctx: FunctionContext) -> Type:
    """Check the name of one ``TrustPolicy(...)`` call."""
    api = ctx.api
    if not isinstance(api, TypeChecker) or not ctx.args or len(ctx.args[0]) != 1:
        return ctx.default_return_type
    expr = ctx.args[0][0]
    verdict = classify(expr, api)
    if isinstance(verdict, AnyTyped):
        api.fail(any_value("TrustPolicy()", '"name"', verdict.what), expr, code=errorcodes.ANY)
        return ctx.default_return_type
    if isinstance(verdict, NotWritten) or verdict.values is None:
        what = verdict.what if isinstance(verdict, NotWritten) else describe(expr, api)
        api.fail(
            f"TrustPolicy name must be a string literal (or a Final str constant), got {what}; "
            'name each escape hatch where it is made, e.g. TrustPolicy("admin-prompts"), so '
            "that review and veridic hatches can see it",
            expr,
            code=errorcodes.POLICY,
        )
        return ctx.default_return_type
    for message in _problems(settings, verdict.values):
        api.fail(message, expr, code=errorcodes.POLICY)
    return ctx.default_return_type


def _problems(settings: PolicySettings, values: frozenset[str]) -> list[str]:
    problems = [
        f'TrustPolicy needs a non-empty name, got "{name}": name the door, '
        'e.g. TrustPolicy("admin-authored-prompts")'
        for name in sorted(values)
        if not name.strip()
    ]
    if settings.problem is not None:
        problems.append(f"TrustPolicy names cannot be checked: {settings.problem}")
    elif settings.names is not None:
        listed = ", ".join(sorted(settings.names)) or "none"
        problems.extend(
            f'trust policy "{name}" is not in [tool.veridic] trust-policies of '
            f"{settings.source} (listed: {listed}); add it there so the new escape hatch is "
            "reviewed, or use one of the listed policies"
            for name in sorted(values)
            if name.strip() and name not in settings.names
        )
    return problems
