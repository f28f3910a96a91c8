"""Notes on mypy's own errors about a brand: how to mint, or where the text belongs.

``Composer().system(text)`` with ``text: str`` is refused by mypy itself
(``arg-type``: ``expected "TrustedInstruction"``), as are ``prompt:
TrustedInstruction = text`` (``assignment``), ``return text`` from a function
declared to return one (``return-value``), and a ``str`` item in the parts of
``join()`` (``list-item``, or ``misc`` for a generator). The plugin adds a note
right below each such error saying what to do: mint it (``instruction("...")``
for a literal, an ``InstructionField``, ``join()``, a ``TrustPolicy``), place
outside text where it belongs (``Composer.data()``, ``Composer.user()``), or
brand it with ``untrusted()`` where ``UntrustedText`` is expected.

How: mypy lets a plugin change neither its messages nor its checks, and has no
hook on assignments or returns; a call hook runs after mypy checked the call's
arguments, but mypy reports the same mistake under four codes and at two
positions depending on the shape of the argument. So the plugin watches the
errors mypy records instead: a filter (mypy's ``ErrorWatcher`` with a callable
``filter_errors``, which never filters) at the bottom of mypy's watcher stack,
so that the errors of a speculative check, which a watcher above discards, never
reach it. For an error whose message names a brand as the expected type, it
records the error as mypy would (``type: ignore`` comments included), then the
note with the error's own code and position, so that the note is printed below
its error (after mypy's own note when a ``type: ignore`` names another code) and is
silenced with it.

The watch starts with the first hook the plugin runs in a build: on a cold run,
the ``LiteralString`` of veridic's own ``instruction()``, before any module is
type-checked; on a warm one, the first ``TrustedInstruction`` or ``UntrustedText``
annotation of a module being analysed (a type-analyze hook asked only until the
watch starts), or the first call hook, which adds the notes of the current
module's earlier errors then.

A brand error (a plain ``str`` kept as a ``TrustedInstruction``) that a ``type:
ignore`` of mypy's code silenced is reported again as ``veridic-forge`` on its line: the
ignore forged the value as a ``cast()`` would, and only an ignore that names
``veridic-forge`` is listed by ``veridic hatches``. ``return-value`` and ``assignment``
at once; any other code (``arg-type``, ``list-item``) at the end of the module's check
(:func:`report_silenced`), unless the text is an argument of a call of veridic's own,
whose run time refuses it there (a test of ``Composer.system()``'s check ignores the
error on purpose): the project's own function with a ``TrustedInstruction`` parameter
takes it as minted, and hands it on to a ``TrustedText`` position that prints it.

The watch relies on mypy's internal error store (``Errors``): if that changes, the
notes and this report are gone and nothing else is (``tests/typecheck/brand_notes.py``
and ``silenced.py`` pin that they are there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from mypy.checker import TypeChecker
from mypy.errors import ErrorInfo, Errors, ErrorWatcher
from mypy.nodes import CallExpr, Expression, TypeInfo
from mypy.plugin import AnalyzeTypeContext, Plugin
from mypy.server.subexpr import get_subexpressions
from mypy.typeanal import TypeAnalyser
from mypy.types import CallableType, Instance, Overloaded, Type, get_proper_type

from veridic.mypy import errorcodes
from veridic.mypy._names import in_package

MINT: Final = (
    'A TrustedInstruction is minted, not converted: write instruction("...") for text '
    "written in code, read it from an InstructionField, join() trusted parts (an f-string, "
    '"+" with a str, .format() and str.join() give a plain str), or vouch for it with '
    'TrustPolicy("name").vouch(text, reason=...); outside text belongs in Composer.data() '
    "or Composer.user()"
)
DATA: Final = (
    "UntrustedText is outside text and never gives instructions: place it as data with "
    "Composer.data(label, text), Composer.user(text) or Composer.tool_result(); if it is "
    'reviewed instruction text, vouch for it with TrustPolicy("name").vouch(text, reason=...)'
)
BRAND: Final = (
    'Brand outside text with untrusted(text, source="..."), so that every error and audit '
    "can say where it came from"
)

_TYPES: Final = re.compile(
    r"(?:incompatible (?:item )?type|expression has type|got|actual type) "
    r'(?:"(?P<qa>[^"]+)"|(?P<ua>[^";,]+))[;,] .*?'
    r'(?:expected(?: type)?|has type) (?:"(?P<qe>[^"]+)"|(?P<ue>[^";,)]+))'
)
"""The actual and the expected type in mypy's messages of incompatible types."""
_WORD: Final = re.compile(r"[A-Za-z_][\w.]*")
_BRANDS: Final = ("TrustedInstruction", "UntrustedText")

_watched: list[Errors] = []
_own: list[ErrorWatcher] = []
"""The notes watcher of the build, once installed."""
_SILENCED: dict[str, list[ErrorInfo]] = {}
"""Per file: the brand errors an ignore silenced whose call decides (:func:`report_silenced`)."""


def forget() -> None:
    """A new build starts: its errors are not watched yet."""
    _watched.clear()
    _own.clear()
    _SILENCED.clear()


@contextmanager
def outside_speculation(errors: Errors) -> Iterator[None]:
    """Record errors as if mypy were not trying a check it may discard.

    A call hook can run while mypy tries a type (a return context, an operator's
    reverse method, an overload's items) under watchers that throw the errors away,
    or that read "an error occurred" as "this type does not fit". An error about the
    module itself (a private import) belongs to none of those tries: with the
    watchers above the notes watcher set aside, it is recorded once, ``type:
    ignore`` comments included, and changes nothing mypy infers.
    """
    try:
        stack = errors._watchers
    except AttributeError:  # pragma: no cover - another mypy's internals
        yield
        return
    saved = stack[:]
    stack[:] = [watcher for watcher in saved if watcher in _own]
    try:
        yield
    finally:
        stack[:] = saved


def watching() -> bool:
    """Whether the errors of a build are watched already."""
    return bool(_watched)


def watched() -> Errors | None:
    """The error store of the build, once it is watched (it knows the module being checked)."""
    return _watched[0] if _watched else None


def analyze_brand(plugin: Plugin, fullname: str, ctx: AnalyzeTypeContext) -> Type:
    """A ``TrustedInstruction`` annotation before the watch started: start it, then analyse.

    The type is what mypy makes of a reference to a class without arguments; the
    plugin answers only for the first such annotation of a build. mypy also asks while
    it type-checks a module, when an argument may be a type (``TypeAdapter(
    TrustedInstruction)``): its checker then looks names up from the module, where
    ``veridic`` itself may be unbound, so the brand is found by its full name.
    """
    api = ctx.api
    errors = getattr(api.api, "errors", None) if isinstance(api, TypeAnalyser) else None
    if isinstance(errors, Errors):
        watch(errors)
    if ctx.type.args:
        ctx.api.fail(f'"{fullname.rpartition(".")[2]}" expects no type arguments', ctx.context)
    symbol = plugin.lookup_fully_qualified(fullname)
    if symbol is not None and isinstance(symbol.node, TypeInfo):
        return Instance(symbol.node, [])
    return ctx.api.named_type(fullname, [])  # pragma: no cover - veridic defines the brands


def watch(errors: Errors) -> None:
    """Watch ``errors``, the error store of the build (once per build)."""
    if _watched and _watched[0] is errors:
        return
    _watched[:] = [errors]
    notes = _Notes(errors)
    try:
        own = ErrorWatcher(errors, filter_errors=notes)
        errors._watchers.insert(0, own)
        _own[:] = [own]
        file = errors.file
        for info in list(errors.error_info_map.get(file, [])):
            text = note_for(info)
            if text is not None:
                errors.note_for_info(file, info, text, info.code)
    except (AttributeError, TypeError):  # pragma: no cover - another mypy's internals
        return


class _Notes:
    """The watcher's filter: records a brand error itself, with its note after it."""

    def __init__(self, errors: Errors) -> None:
        self.errors = errors
        self.busy = False

    def __call__(self, file: str, info: ErrorInfo) -> bool:
        if self.busy:
            return False
        text = note_for(info)
        if text is None:
            return False
        self.busy = True
        try:
            self.errors.add_error_info(info, file=file)
            if _shown(self.errors, file, info):
                self.errors.note_for_info(file, info, text, info.code)
            elif text == MINT and _ignored_here(self.errors, file, info):
                if info.code is not None and info.code.code in _KEPT:
                    _report_silenced(self.errors, info)
                else:
                    _SILENCED.setdefault(file, []).append(info)
        finally:
            self.busy = False
        return True  # recorded above: mypy's own call stops here


_KEPT: Final = frozenset({"return-value", "assignment"})
"""mypy's codes for a plain ``str`` kept as a ``TrustedInstruction`` (returned, assigned),
where it stays typed trusted whatever the call around it. Under any other code (``arg-type``,
``list-item``) the text may be an argument of veridic's own, whose run time refuses it there,
and the tests of that check ignore the error on purpose: :func:`report_silenced` decides."""


def _report_silenced(errors: Errors, info: ErrorInfo) -> None:
    errors.report(
        info.line,
        info.column,
        _silenced(info),
        code=errorcodes.FORGE,
        origin_span=info.origin_span,
        end_line=info.end_line,
        end_column=info.end_column,
    )


def has_silenced(path: str) -> bool:
    """Whether a brand error an ignore silenced in ``path`` waits for its call's judgement."""
    return path in _SILENCED


def report_silenced(checker: TypeChecker) -> None:
    """Report each brand error an ignore silenced in ``checker``'s module, other than of
    ``return-value`` or ``assignment`` (reported at once), unless its text is an argument of
    a call of veridic's own: the run time refuses the text there.

    The innermost call whose argument holds the error's position decides; the module's
    calls are looked at only when an ignore silenced such an error in it.
    """
    silenced = _SILENCED.pop(checker.path, [])
    if not silenced:
        return
    spans = [
        (arg, call)
        for statement in checker.tree.defs
        for call in get_subexpressions(statement)
        if isinstance(call, CallExpr)
        for arg in call.args
    ]
    for info in silenced:
        inside = [(arg.line, arg.column, call) for arg, call in spans if _holds(arg, info)]
        innermost = max(inside, key=lambda found: found[:2], default=None)
        if innermost is None or not _veridic_callee(innermost[2], checker):
            _report_silenced(checker.msg.errors, info)


def _holds(arg: Expression, info: ErrorInfo) -> bool:
    """Whether the error ``info`` is reported at a position inside ``arg``."""
    end_line = arg.end_line if arg.end_line is not None else arg.line
    end_column = arg.end_column if arg.end_column is not None else arg.column
    return (arg.line, arg.column) <= (info.line, info.column) <= (end_line, end_column)


def _veridic_callee(call: CallExpr, checker: TypeChecker) -> bool:
    """Whether ``call`` calls a function, method or class of veridic's own."""
    callee = get_proper_type(checker.lookup_type_or_none(call.callee))
    if isinstance(callee, Overloaded):
        callee = callee.items[0]
    if not isinstance(callee, CallableType):
        return False
    if callee.is_type_obj():
        return in_package(callee.type_object().module_name)
    definition = callee.definition
    return definition is not None and in_package(definition.fullname)


def _ignored_here(errors: Errors, file: str, info: ErrorInfo) -> bool:
    """Whether mypy dropped ``info``, a plain ``str`` kept as a ``TrustedInstruction``, for a
    ``type: ignore`` comment on its lines (of the file being checked, where a new error can
    be reported)."""
    if info.code is None or file != errors.file:
        return False
    if _shown(errors, file, info):
        return False  # shown, with mypy's note that the ignore names another code
    lines = errors.ignored_lines.get(file, {})
    return any(errors.is_ignored_error(line, info, lines) for line in info.origin_span)


def _shown(errors: Errors, file: str, info: ErrorInfo) -> bool:
    """Whether mypy recorded ``info`` (no ``type: ignore`` dropped it).

    Not only as the last entry: under a ``type: ignore`` of another code, mypy
    records its note that the ignore does not cover the error right after it (and,
    with ``show_error_code_links``, a link), so the how-to note follows those.
    """
    return any(recorded is info for recorded in reversed(errors.error_info_map.get(file, [])))


def _silenced(info: ErrorInfo) -> str:
    """``veridic-forge``: a ``type: ignore`` of mypy's own code silenced a brand error."""
    code = "misc" if info.code is None else info.code.code
    return (
        f'a "type: ignore" silenced mypy\'s {code} error here, which refuses text that '
        "was not minted where a TrustedInstruction is expected: the value got the type "
        "without a provenance (a forge, like a cast()), and a TrustedText position prints it "
        "in the capability section while veridic hatches lists only veridic's codes; mint "
        'it with instruction(), an InstructionField or TrustPolicy("name").vouch(text, '
        "reason=...), or, where forging is the point (a test of the run-time check), add "
        "veridic-forge to the ignore so that veridic hatches lists it"
    )


def note_for(info: ErrorInfo) -> str | None:
    """The note for one of mypy's errors, if it refuses text where a brand is expected.

    Only text where the expected type has the brand counts: ``dict[str, int]`` given for
    ``dict[str, TrustedInstruction]`` has a ``str``, but as the key, so neither the note
    nor, under a ``type: ignore``, ``veridic-forge`` (:func:`_silenced`) is about it.
    Where the arguments do not stand one for one (``tuple[str, str]`` for
    ``Iterable[TrustedInstruction]``), text in any of them counts.
    """
    message = info.message
    if info.severity != "error" or not any(brand in message for brand in _BRANDS):
        return None
    if info.code is not None and info.code.code.startswith("veridic-"):
        return None
    match = _TYPES.search(message)
    if match is None:
        return None
    actual_text, expected_text = match["qa"] or match["ua"], match["qe"] or match["ue"]
    actual, expected = _parsed(actual_text), _parsed(expected_text)
    if actual is None or expected is None:  # a shape not parsed (a callable): by its words
        return _note_by_words(set(_WORD.findall(actual_text)), set(_WORD.findall(expected_text)))
    if _at_brand(expected, actual, "TrustedInstruction", _is_untrusted):
        return DATA
    if _at_brand(expected, actual, "TrustedInstruction", _is_text):
        return MINT
    if _at_brand(expected, actual, "UntrustedText", _is_text):
        return BRAND
    return None


def _note_by_words(actual: set[str], expected: set[str]) -> str | None:
    """The note by the names either type holds, wherever they are in it."""
    if "TrustedInstruction" in expected:
        if "UntrustedText" in actual:
            return DATA
        return MINT if actual & _TEXT else None
    if "UntrustedText" in expected and actual & _TEXT:
        return BRAND
    return None


_TEXT: Final = frozenset({"str", "Literal", "LiteralString"})
_SHOWN_TOKEN: Final = re.compile(
    r"\s*(?:(?P<text>'(?:[^'\\]|\\.)*')|(?P<name>-?[\w.]+)|(?P<mark>[\[\],|?]))"
)
"""A token of a type as mypy's messages write it: a quoted literal, a name (``str``,
``veridic.text.provenance.TrustedInstruction``, ``...``, ``1``) or a mark."""

_Shown = tuple[str, tuple["_Shown", ...]]
"""A type as a message writes it: its name and arguments (``("dict", (("str", ()), ("int",
())))``); a union is named ``|``, a quoted literal ``'``, an argument list ``[``."""


def _parsed(shown: str) -> _Shown | None:
    """``shown``, a type as mypy's message writes it, parsed; ``None`` for a shape this
    reader does not know (a callable written ``def (...) -> ...``).

    An argument unpacked is read as what it gives: ``*list[str]`` its items' type (each
    item fills the parameter), ``**dict[str, str]`` its values' type.
    """
    stars = len(shown) - len(shown.lstrip("*"))
    text = shown[stars:].rstrip()
    tokens: list[tuple[str, str]] = []
    at = 0
    while at < len(text):
        token = _SHOWN_TOKEN.match(text, at)
        if token is None:
            return None
        at = token.end()
        kind = token.lastgroup or ""
        if token[kind] != "?":  # an inferred literal's mark (Literal['x']?)
            tokens.append((kind, token[kind]))
    tokens.reverse()
    parsed = _union(tokens)
    if parsed is None or tokens:
        return None
    if stars and parsed[1]:
        return parsed[1][-1] if stars == 2 else ("|", parsed[1])
    return parsed


def _union(tokens: list[tuple[str, str]]) -> _Shown | None:
    members: list[_Shown] = []
    while True:
        member = _item(tokens)
        if member is None:
            return None
        members.append(member)
        if not tokens or tokens[-1] != ("mark", "|"):
            return members[0] if len(members) == 1 else ("|", tuple(members))
        tokens.pop()


def _item(tokens: list[tuple[str, str]]) -> _Shown | None:
    if not tokens:
        return None
    kind, value = tokens.pop()
    if kind == "text":
        return ("'", ())
    if kind == "name":
        if tokens and tokens[-1] == ("mark", "["):
            tokens.pop()
            arguments = _arguments(tokens)
            return None if arguments is None else (value, arguments)
        return (value, ())
    if value == "[":  # a callable's parameters: Callable[[str], str]
        arguments = _arguments(tokens)
        return None if arguments is None else ("[", arguments)
    return None


def _arguments(tokens: list[tuple[str, str]]) -> tuple[_Shown, ...] | None:
    """The arguments up to the closing ``]``, which is taken."""
    arguments: list[_Shown] = []
    while tokens and tokens[-1] != ("mark", "]"):
        argument = _union(tokens)
        if argument is None:
            return None
        arguments.append(argument)
        if tokens and tokens[-1] == ("mark", ","):
            tokens.pop()
    if not tokens:
        return None
    tokens.pop()
    return tuple(arguments)


def _at_brand(expected: _Shown, actual: _Shown, brand: str, fits: Callable[[_Shown], bool]) -> bool:
    """Whether ``actual`` has a type that ``fits`` where ``expected`` has ``brand``: the
    type itself, a member of a union, or the same argument of a generic (``list[str]``
    for ``Sequence[TrustedInstruction]``; any item of a ``tuple[X, ...]``)."""
    if expected[0] == "|":
        return any(_at_brand(member, actual, brand, fits) for member in expected[1])
    if actual[0] == "|":
        return any(_at_brand(expected, member, brand, fits) for member in actual[1])
    if expected[0].rpartition(".")[2] == brand:
        return fits(actual)
    return any(_at_brand(e, a, brand, fits) for e, a in _paired(expected[1], actual[1]))


def _paired(
    expected: tuple[_Shown, ...], actual: tuple[_Shown, ...]
) -> list[tuple[_Shown, _Shown]]:
    """The arguments that stand for each other: by position, each against the first of a
    variadic tuple's (``tuple[X, ...]``), or, where the counts differ, each against each:
    a ``tuple[str, str]`` fills an ``Iterable[TrustedInstruction]`` with its items, and a
    ``dict[str, str]`` with its keys, which no position tells."""
    if len(expected) == len(actual):
        return list(zip(expected, actual, strict=True))
    if len(expected) == 2 and expected[1] == ("...", ()):
        return [(expected[0], item) for item in actual]
    if len(actual) == 2 and actual[1] == ("...", ()):
        return [(item, actual[0]) for item in expected]
    return [(wanted, given) for wanted in expected for given in actual]


def _is_text(shown: _Shown) -> bool:
    """Whether ``shown`` is plain text: ``str``, ``LiteralString``, ``Literal['...']``."""
    name = shown[0].rpartition(".")[2]
    if name == "Literal":
        return any(argument[0] == "'" for argument in shown[1])
    return name in ("str", "LiteralString")


def _is_untrusted(shown: _Shown) -> bool:
    return shown[0].rpartition(".")[2] == "UntrustedText"
