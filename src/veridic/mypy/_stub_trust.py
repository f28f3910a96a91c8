"""A stub of the project declares no trusted text.

mypy reads a ``.pyi`` beside a ``.py`` (or on ``mypy_path``) instead of the module, and
checks no implementation against it. So a stub that says ``def launder(text: str) ->
TrustedInstruction: ...`` or ``PERSONA: Final[TrustedInstruction]`` is believed, while
the ``.py`` returns the reply as it came: every caller reads it as trusted, with no
``cast()``, no ``type: ignore`` and no error. No stub can have a reason to declare that:
trusted text is minted by veridic's calls, which only a checked ``.py`` makes.

Reported (``veridic-forge``): in a stub of the project (not an installed package's, not
veridic's own), a function's or method's return type, or a variable's or attribute's
declared type, that holds trusted text (``_any_declared.holds_trusted``). A parameter
typed ``TrustedInstruction`` demands trust and gives none: it is fine. A pydantic
model is ``_bare_fields``'s (a field typed ``TrustedInstruction`` is refused there unless
a validator declared to return one mints it, which in a stub is a declaration too: not
seen). Declare the text ``str``, or drop the stub and
let mypy check the module; a compiled module's stub (no ``.py`` to check) declares it
``str``, and its callers vouch for it with a ``TrustPolicy``.

Hook: the end of the stub's check (``get_additional_indirect_deps``).
"""

from __future__ import annotations

from collections.abc import Iterator

from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    AssignmentStmt,
    ClassDef,
    Context,
    Decorator,
    FuncDef,
    MypyFile,
    OverloadedFuncDef,
    Statement,
)
from mypy.types import CallableType, Type, get_proper_type

from veridic.mypy import _names, errorcodes
from veridic.mypy._any_declared import holds_trusted

_MODEL = "pydantic.main.BaseModel"


def may_report(tree: MypyFile) -> bool:
    """Whether ``tree``, a stub of the project, declares trusted text."""
    return any(_declarations(tree))


def report(checker: TypeChecker) -> None:
    """Report each declaration of trusted text in a stub of the project."""
    for name, declared, where in _declarations(checker.tree):
        shown = format_type(declared, checker.options)
        checker.fail(
            f'the stub of "{checker.tree.fullname}" got "{name}" declared {shown}: mypy reads it '
            "instead of the module and checks no implementation against it, so whatever the "
            "module returns there (a reply as it came) is read as trusted; declare it str "
            "(or UntrustedText) in the stub, or remove the stub and let mypy check the module, "
            "which mints the text with instruction() or join(); for a compiled module (no .py "
            "to check), declare it str and vouch for it where it is used with "
            'TrustPolicy("name").vouch(text, reason=...)',
            where,
            code=errorcodes.FORGE,
        )


def _declarations(tree: MypyFile) -> Iterator[tuple[str, Type, Context]]:
    if not tree.is_stub or _names.in_package(tree.fullname):
        return
    yield from _in(tree.defs)


def _in(statements: list[Statement]) -> Iterator[tuple[str, Type, Context]]:
    for statement in statements:
        if isinstance(statement, ClassDef):
            if not statement.info.has_base(_MODEL):
                yield from _in(statement.defs.body)
        elif isinstance(statement, AssignmentStmt) and statement.type is not None:
            if holds_trusted(statement.type):
                for target in statement.lvalues:
                    yield _named(target), statement.type, statement
        else:
            yield from _function(statement)


def _function(statement: Statement) -> Iterator[tuple[str, Type, Context]]:
    items = statement.items if isinstance(statement, OverloadedFuncDef) else [statement]
    for item in items:
        function = item.func if isinstance(item, Decorator) else item
        if not isinstance(function, FuncDef):
            continue
        declared = get_proper_type(function.type)
        if isinstance(declared, CallableType) and holds_trusted(declared.ret_type):
            yield function.name, declared.ret_type, function


def _named(target: object) -> str:
    name = getattr(target, "name", None)
    return name if isinstance(name, str) else "a target"
