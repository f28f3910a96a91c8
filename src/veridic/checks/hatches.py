"""Every escape hatch in the source, for review: ``veridic hatches PATH...``.

The brands are only as strong as the places that get around them: casts,
constructor calls, trust policies (with their vouches) and ignore comments.
This module finds each one with :mod:`ast` (and :mod:`tokenize` for
comments), without importing the code:

===================  ==========================================  ===============
kind                 what                                        finding?
===================  ==========================================  ===============
``cast-to-brand``    ``typing.cast`` to ``TrustedInstruction``   yes, outside
                     or ``UntrustedText`` (name, attribute,      veridic
                     string annotation, or inside a generic)
``brand-call``       ``TrustedInstruction(x)``: the NewType's    yes, outside
                     constructor, an identity that mints         veridic
                     nothing; or passed on as a value
                     (``map(TrustedInstruction, texts)``,
                     ``TypeAdapter(TrustedInstruction)``)
``trust-policy``     ``TrustPolicy("name")``                     when the name is
                                                                 not fixed in the
                                                                 module, is empty,
                                                                 or is not in the
                                                                 configured list
``vouch``            ``policy.vouch(text, reason=...)``          no (listed with
                                                                 its reason)
``type-ignore``      ``# type: ignore[veridic-...]``, or a bare  no (listed)
                     ``# type: ignore`` (it silences them too)
``unparsable``       a file that is not valid Python             yes
``stub-shadows``     a ``.py`` module with a ``.pyi`` stub       no (listed)
                     beside it: mypy reads the stub and checks
                     none of the module
===================  ==========================================  ===============

A hatch is known by its name wherever it was imported from: a module of the
project may re-export veridic's (``from app.types import TrustedInstruction``),
which mypy follows and a scan of one file at a time cannot. A name bound to
``cast``, a brand or ``TrustPolicy`` (``Policy = TrustPolicy``,
``Trusted: TypeAlias = TrustedInstruction``, ``c = typing.cast``) is followed
as an import alias is: mypy follows it, so ``Policy("x")`` is a trust policy
and ``cast(Trusted, text)`` a cast to a brand. So is a relative import, and a
name reached with a spelling fixed in the source (``getattr(veridic,
"TrustPolicy")``, ``vars(veridic)["TrustPolicy"]``,
``__import__("veridic").TrustPolicy``; see ``_qualified``). ``TrustPolicy``
handed on as a value, and ``getattr(veridic, name)`` of a name the source does
not fix, are ``trust-policy`` findings: the policies made through them have no
name the scan can read.

A policy name is "fixed in the module" as the ``veridic.mypy`` plugin reads it:
a literal, ``+`` or ``x if c else y`` of literals, a str constant bound once at
module level, or a ``Literal[...]`` parameter. One difference: a constant
imported from another module is a finding here, since each file is read alone.

A cast or a constructor call forges the static brand without run-time
provenance: mypy believes the text is trusted while the composer refuses it,
so the two checks disagree. The package's own modules are the minting
authority, so what they do is listed, not flagged.

mypy's configuration can switch the static checks off too, away from the code
they guard. :func:`scan_source` reads a file's inline ``# mypy:`` comments;
:func:`find_hatches` also reads, for each directory it is given, the
configuration file mypy would use when run there (:func:`scan_mypy_config`):

========================  =====================================  ==========
kind                      what                                   finding?
========================  =====================================  ==========
``inline-disable-code``   ``# mypy: disable-error-code="..."``   no (listed)
                          naming a ``veridic-*`` code
``inline-ignore-errors``  ``# mypy: ignore-errors``              no (listed)
``config-disable-code``   ``disable_error_code`` with a          no (listed)
                          ``veridic-*`` code, in ``[mypy]``, a
                          ``[mypy-pattern]`` section or a
                          ``[[tool.mypy.overrides]]``
``config-ignore-errors``  ``ignore_errors = True`` in any of     no (listed)
                          those sections
``plugin-missing``        ``plugins`` without ``veridic.mypy``   yes
                          (or no ``[mypy]`` section at all)
``config-unparsable``     a configuration file mypy cannot       yes
                          parse (it skips it and reads the
                          next)
========================  =====================================  ==========

Both are read as mypy reads them, by mypy's own ``config_parser`` when mypy
is importable (by a reader written after it otherwise, see
``veridic.checks._mypy_settings``): only what mypy applies is listed. A key mypy
does not recognise (``disable-error-code`` with dashes in a configuration
file, another case in ``pyproject.toml``), a section whose module pattern
mypy refuses or that a later section replaces, and a code that
``enable_error_code`` turns back on are not listed; a key written in any case
in an INI file or a ``# mypy:`` comment is, since mypy reads those names
without case.

Silencing a check on purpose is listed, wherever it is written, like a
``# type: ignore[veridic-...]``: a team may switch a check off for a legacy
module after review, and the listing keeps that visible without failing
every later run. A missing plugin or an unreadable configuration is a
finding: then no check runs at all, and nobody decided that. Other ``# mypy:``
options and ``disable_error_code`` entries that are not ``veridic-*`` are not
reported.

>>> source = '''
... from typing import cast
... from veridic import TrustedInstruction, TrustPolicy
... forged = cast(TrustedInstruction, user_text)
... legacy = TrustPolicy("legacy-prompts")
... ok = legacy.vouch(text, reason="migrated prompt table")
... '''
>>> for hatch in scan_source(source, "app.py"):
...     print(hatch.line, hatch.kind, hatch.finding)
4 cast-to-brand True
5 trust-policy False
6 vouch False
>>> inline = 'x = 1\\n# mypy: disable-error-code="veridic-literal, misc"\\n'
>>> [(h.line, h.kind, h.codes) for h in scan_source(inline, "app.py")]
[(2, 'inline-disable-code', ('veridic-literal',))]
"""

from __future__ import annotations

import ast
import io
import os
import re
import shlex
import tokenize
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from veridic.checks import _mypy_settings
from veridic.checks._regular import read_regular
from veridic.errors import VeridicError

__all__ = ["Hatch", "HatchKind", "find_hatches", "scan_mypy_config", "scan_source"]

HatchKind = Literal[
    "cast-to-brand",
    "brand-call",
    "trust-policy",
    "vouch",
    "type-ignore",
    "unparsable",
    "inline-disable-code",
    "inline-ignore-errors",
    "config-disable-code",
    "config-ignore-errors",
    "plugin-missing",
    "config-unparsable",
    "stub-shadows",
]

_BRANDS: Final = frozenset({"TrustedInstruction", "UntrustedText"})
_SKIPPED_DIRS: Final = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})
_IGNORE: Final = re.compile(r"type:\s*ignore\s*\[([^\]]*)\]")
"""An ignore naming its codes; mypy allows spaces before the ``[`` (``ignore [code]``)."""
_BARE_IGNORE: Final = re.compile(r"type:\s*ignore(?![\w-])(?!\s*\[)")
_PACKAGE: Final = Path(__file__).resolve().parent.parent
"""The veridic package (this file is in its ``checks`` subpackage)."""
_SHORT: Final = 100
_INSIDE: Final = "inside the veridic package, which is the minting authority: listed, not a finding"


@dataclass(frozen=True, slots=True)
class Hatch:
    """One escape hatch at ``file:line``.

    ``finding`` tells a failure (the command exits 1) from an item that is only
    listed for review. ``why`` says what is wrong and what to do instead for a
    finding, and what the item means for a listed one. ``policy`` and
    ``reason`` are set for trust policies and vouches when the source names
    them (``None`` when it does not, e.g. a computed name). ``codes`` holds the
    ``veridic-*`` error codes that an ignore comment or a mypy setting turns
    off, in the order written (empty for the other kinds).
    """

    file: str
    line: int
    kind: HatchKind
    text: str
    finding: bool
    why: str
    policy: str | None = None
    reason: str | None = None
    codes: tuple[str, ...] = ()


def find_hatches(
    paths: Iterable[str | os.PathLike[str]],
    *,
    trust_policies: frozenset[str] | None = None,
) -> tuple[Hatch, ...]:
    """Scan every ``.py`` and ``.pyi`` file under ``paths`` (files or directories).

    ``trust_policies`` is the configured list of policy names (``None``: any
    name is allowed, but a computed name is still a finding). Directories are
    walked recursively, into folders that are symbolic links too (each real
    folder once), skipping hidden ones, and ``__pycache__``, ``build``,
    ``dist``, ``node_modules`` and ``site-packages`` unless they or their
    parent hold an ``__init__.py`` (a package of the code named ``build`` is
    scanned, and so is a folder of that name importable from one). For each directory, the
    mypy configuration mypy would use when run there is read too
    (:func:`scan_mypy_config`); one file found from several directories is
    reported once. The result is sorted by file and line.

    Each real file is read once, however many paths reach it.

    Raises:
        VeridicError: a path does not exist, is a directory that holds no ``.py``
            file and no mypy configuration file, or is a file given by name that is
            not Python source (a suffix other than ``.py``, ``.pyi``, ``.pyw`` or
            none): nothing would be checked.
    """
    paths = tuple(paths)
    found: list[Hatch] = list(
        dict.fromkeys(
            hatch for given in paths if Path(given).is_dir() for hatch in scan_mypy_config(given)
        )
    )
    for path in _python_files(paths):
        found.extend(_shadowed(path))
        try:
            source = _read(path)
        except (OSError, UnicodeDecodeError, SyntaxError, LookupError) as error:
            found.append(_unparsable(_display(path), 1, error))
            continue
        found.extend(
            scan_source(
                source,
                _display(path),
                trust_policies=trust_policies,
                inside_veridic=_is_inside_veridic(path),
            )
        )
    return tuple(sorted(found, key=lambda h: (h.file, h.line, h.kind)))


def scan_source(
    source: str,
    filename: str,
    *,
    trust_policies: frozenset[str] | None = None,
    inside_veridic: bool = False,
) -> tuple[Hatch, ...]:
    """The hatches of one module's source text; ``filename`` is only for display.

    This includes the file's inline mypy configuration comments (``# mypy:
    ...``), read as mypy reads them; the configuration files are
    :func:`scan_mypy_config`'s business.
    """
    try:
        tree = ast.parse(source, filename=filename)
        scanner = _Scanner(filename, _aliases(tree), trust_policies, inside_veridic)
        scanner.scan(tree)
    except SyntaxError as error:
        return (_unparsable(filename, error.lineno or 1, error),)
    except RecursionError as error:
        return (_too_deep(filename, error),)
    return (
        *scanner.found,
        *_type_ignores(source, filename),
        *_inline_configuration(source, filename),
    )


class _Scanner:
    def __init__(
        self,
        filename: str,
        aliases: dict[str, str],
        trust_policies: frozenset[str] | None,
        inside_veridic: bool,
    ) -> None:
        self.filename = filename
        self.aliases = aliases
        self.allowed = trust_policies
        self.inside_veridic = inside_veridic
        self.found: list[Hatch] = []
        self.policies: dict[str, str | None] = {}
        self.mentions_policy = False
        self.constants: dict[str, frozenset[str]] = {}
        self.enclosing: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.literal_parameters: dict[int, dict[str, frozenset[str]]] = {}

    def scan(self, tree: ast.Module) -> None:
        self.mentions_policy = any(
            self._is_policy_name(node) for node in ast.walk(tree) if isinstance(node, ast.Name)
        ) or any(_last(q) == "TrustPolicy" for q in self.aliases.values())
        self.constants = _module_constants(tree)
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                self.literal_parameters[id(function)] = self._literal_parameters(function)
                for inner in ast.walk(function):
                    if isinstance(inner, ast.Call):
                        self.enclosing[id(inner)] = function  # innermost wins: walked later
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                created = self._policy_call(node.value)
                if created is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = self._names(created)
                for target in targets:
                    self.policies[ast.unparse(target)] = (
                        " | ".join(sorted(names)) if names is not None else None
                    )
        for node in ast.walk(tree):
            if isinstance(node, ast.Call | ast.Subscript) and self._computed_veridic_name(node):
                self._computed(node)
            elif isinstance(node, ast.Call):
                self._call(node)
        self._brand_values(tree)

    def _brand_values(self, tree: ast.Module) -> None:
        """Each brand, or ``TrustPolicy``, handed on as a value: ``map(TrustedInstruction,
        texts)``, ``partial(TrustPolicy, name)``, ``(P := TrustPolicy)``.

        mypy types the items as ``TrustedInstruction``, so every call made through
        the value forges the brand; the plugin refuses it (``veridic-forge``), and
        the scan lists it for a project that ignores that error or runs no plugin.
        A policy made through the value is one whose name the scan never sees.
        A brand named as a type (an annotation,
        ``list[TrustedInstruction]``, a ``TypeVar`` bound, the target of a cast) or
        renamed (``Trusted = TrustedInstruction``, followed as an alias) is not one.
        """
        parents = {
            id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
        }
        spelt = _bound_to_text(tree) | _own_names(tree, self.aliases)
        reported: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if _reached_by_name(node, self.aliases, self.constants.get) is None:
                    continue  # getattr(veridic, "TrustPolicy") is a value; other calls are not
            elif not isinstance(node, ast.Name | ast.Attribute | ast.Subscript) or not isinstance(
                node.ctx, ast.Load
            ):
                continue
            if isinstance(parents.get(id(node)), ast.Attribute):
                continue  # TrustedInstruction.__name__, or the module of veridic.TrustedInstruction
            if isinstance(node, ast.Name) and node.id in spelt:
                continue  # TRUSTED = "veridic.TrustedInstruction", or a name of the module's own
            qualified = self._resolve(node)
            if qualified is None or not (_is_brand(qualified) or _is_policy(qualified)):
                continue
            outer = _type_expression(node, parents)
            holder = parents.get(id(outer))
            if holder is None or id(holder) in reported:
                continue
            if self._passes_on(outer, holder, parents):
                reported.add(id(holder))
                shown = holder if isinstance(holder, ast.expr) else outer
                if _is_policy(qualified):
                    self._policy_value(shown)
                else:
                    self._brand_value(shown, _last(qualified))

    def _policy_value(self, node: ast.expr) -> None:
        if self.inside_veridic:
            self._add(node, "trust-policy", False, _INSIDE)
            return
        self._add(
            node,
            "trust-policy",
            True,
            "TrustPolicy is passed on as a value, so each policy made through it is created "
            "where its name is not written (a partial, a default, a loop or a walrus "
            "variable): the scan cannot list that door nor check it against [tool.veridic] "
            'trust-policies: call TrustPolicy("name") itself where each policy is made',
        )

    def _passes_on(self, value: ast.expr, holder: ast.AST, parents: dict[int, ast.AST]) -> bool:
        """Whether ``holder`` hands ``value`` (a brand, or a type built of one) on to be called."""
        if isinstance(holder, ast.keyword):
            call = parents.get(id(holder))
            return isinstance(call, ast.Call) and not self._names_types(call)
        if isinstance(holder, ast.Call):
            return holder.func is not value and not self._looks_at(holder, value)
        if isinstance(holder, ast.Tuple | ast.List | ast.Set) and self._only_looked_at(
            holder, parents
        ):
            return False
        if isinstance(holder, ast.Assign):
            return not all(isinstance(target, ast.Name) for target in holder.targets)
        if isinstance(holder, ast.AnnAssign):
            return holder.value is value and not isinstance(holder.target, ast.Name)
        return isinstance(holder, _VALUE_HOLDERS)

    def _only_looked_at(self, items: ast.expr, parents: dict[int, ast.AST]) -> bool:
        """A tuple of classes tested, never called: ``isinstance(p, (TrustPolicy, str))``,
        ``k in (TrustPolicy, Registry)``."""
        parent = parents.get(id(items))
        if isinstance(parent, ast.Compare):
            return items is not parent.left
        return isinstance(parent, ast.Call) and self._looks_at(parent, items)

    def _looks_at(self, call: ast.Call, value: ast.expr) -> bool:
        """Whether ``call`` only looks at ``value``: takes it as a type (``isinstance``),
        reads or patches an attribute of it (``getattr(TrustPolicy, "vouch")``,
        ``mock.patch.object(TrustPolicy, ...)``, ``monkeypatch.setattr(TrustPolicy, ...)``)
        or shows it (``print``, ``inspect.signature``): none makes a policy through it. A
        value set as an attribute (``setattr(app, "factory", TrustPolicy)``) is handed on."""
        if self._names_types(call):
            return True
        qualified = self._resolve(call.func)
        if qualified is None:
            return False
        if _last(qualified) in _LOOKERS:
            return True
        holder_of = _last(qualified) in _ATTRIBUTE_READERS or qualified.endswith("patch.object")
        return holder_of and bool(call.args) and call.args[0] is value

    def _names_types(self, call: ast.Call) -> bool:
        """A call that takes types, not callables: a cast (its own kind), a TypeVar..."""
        qualified = self._resolve(call.func)
        return qualified is not None and (_is_cast(qualified) or _last(qualified) in _TYPE_TAKERS)

    def _brand_value(self, node: ast.expr, brand: str) -> None:
        if self.inside_veridic:
            self._add(node, "brand-call", False, _INSIDE)
            return
        self._add(
            node,
            "brand-call",
            True,
            f"{brand} is passed on as a value, and each call made through it is the "
            "NewType's identity: mypy types its results as the brand without seeing a "
            f"{brand}(...) call to refuse, and the run time refuses the plain str: "
            + (
                "mint each text with instruction(), read it from an InstructionField or "
                "vouch for it with TrustPolicy(...).vouch(reason=...)"
                if brand == "TrustedInstruction"
                else "brand each text with untrusted(text, source=...)"
            ),
        )

    def _computed(self, node: ast.expr) -> None:
        self._add(
            node,
            "trust-policy",
            not self.inside_veridic,
            f"reaches a name of veridic by a computed name ({_short(ast.unparse(node))}), "
            "which may be TrustPolicy or a brand, so the scan cannot say which door this "
            "is nor check it against [tool.veridic] trust-policies: import the name "
            '(from veridic import TrustPolicy) and call it, TrustPolicy("name")',
        )

    def _call(self, call: ast.Call) -> None:
        qualified = self._resolve(call.func)
        if qualified is not None and _is_cast(qualified) and call.args:
            if _mentions_brand(call.args[0], self._resolve):
                self._cast(call)
        elif qualified is not None and _is_brand(qualified):
            self._brand_call(call, _last(qualified))
        elif self._policy_call(call) is not None:
            self._policy(call)
        elif isinstance(call.func, ast.Attribute) and call.func.attr == "vouch":
            self._vouch(call, call.func.value)

    def _cast(self, call: ast.Call) -> None:
        if self.inside_veridic:
            self._add(call, "cast-to-brand", False, _INSIDE)
            return
        target = ast.unparse(call.args[0])
        self._add(
            call,
            "cast-to-brand",
            True,
            f"cast to {target} brands text for the type checker without minting it, so mypy "
            "and the run-time checks disagree: mint trusted text with instruction(), an "
            "InstructionField or a named TrustPolicy(...).vouch(reason=...), and mark "
            "outside text with untrusted(text, source=...)",
        )

    def _brand_call(self, call: ast.Call, brand: str) -> None:
        if self.inside_veridic:
            self._add(call, "brand-call", False, _INSIDE)
            return
        self._add(
            call,
            "brand-call",
            True,
            f"{brand}(...) is the NewType's identity function: it returns a plain str with "
            "no provenance, which every instruction position refuses at run time: "
            + (
                "use instruction(), an InstructionField or TrustPolicy(...).vouch(reason=...)"
                if brand == "TrustedInstruction"
                else "use untrusted(text, source=...) so the text says where it came from"
            ),
        )

    def _policy(self, call: ast.Call) -> None:
        names = self._names(call)
        imported = self._imported_name(call)
        if names is None and imported is not None:
            self._add(
                call,
                "trust-policy",
                True,
                f"TrustPolicy name {ast.unparse(call.args[0])} is imported from {imported}, and "
                "veridic hatches reads one module at a time, so it cannot say which door this "
                "is: write the name here, as a literal or a str constant of this module",
            )
            return
        if names is None:
            self._add(
                call,
                "trust-policy",
                True,
                "TrustPolicy name is not written in code (a string literal, a str constant "
                "of this module or a Literal[...] parameter), so review cannot tell which door "
                'this is: write the name where the policy is made, e.g. TrustPolicy("admin-'
                'authored-prompts")',
            )
            return
        label = " or ".join(repr(n) for n in sorted(names))
        policy = " | ".join(sorted(names))
        empty = sorted(n for n in names if not n.strip())
        unlisted = sorted(names - self.allowed) if self.allowed is not None else []
        if empty:
            self._add(
                call,
                "trust-policy",
                True,
                "TrustPolicy name is empty, which TrustPolicy refuses when it is created: "
                'name the door, e.g. TrustPolicy("admin-authored-prompts")',
                policy=policy,
            )
        elif unlisted and self.allowed is not None:
            listed = ", ".join(sorted(self.allowed)) or "none"
            self._add(
                call,
                "trust-policy",
                True,
                f"trust policy {' or '.join(map(repr, unlisted))} is not in [tool.veridic] "
                f"trust-policies (listed: {listed}): add it there so the new escape hatch is "
                "reviewed, or use a listed policy",
                policy=policy,
            )
        else:
            self._add(
                call, "trust-policy", False, f"trust policy {label} is created here", policy=policy
            )

    def _imported_name(self, call: ast.Call) -> str | None:
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Name):
            return None
        qualified = self.aliases.get(call.args[0].id)
        return None if qualified is None else qualified.rpartition(".")[0] or qualified

    def _names(self, call: ast.Call) -> frozenset[str] | None:
        """The names a ``TrustPolicy(...)`` call can create, when the source fixes them."""
        if len(call.args) != 1 or call.keywords:
            return None
        return _string_values(call.args[0], self._name_values(call))

    def _name_values(self, call: ast.Call) -> Callable[[str], frozenset[str] | None]:
        function = self.enclosing.get(id(call))
        parameters = self.literal_parameters.get(id(function), {}) if function else {}

        def lookup(name: str) -> frozenset[str] | None:
            if name in parameters:
                return parameters[name]
            return self.constants.get(name)

        return lookup

    def _vouch(self, call: ast.Call, receiver: ast.expr) -> None:
        created = self._policy_call(receiver)
        if created is not None:
            names = self._names(created)
            policy = " | ".join(sorted(names)) if names is not None else None
        else:
            key = ast.unparse(receiver)
            if key in self.policies:
                policy = self.policies[key]
            elif key.rsplit(".", 1)[-1] in self.policies:
                policy = self.policies[key.rsplit(".", 1)[-1]]
            elif self.mentions_policy:
                policy = None
            else:
                return
        reason_node = next((k.value for k in call.keywords if k.arg == "reason"), None)
        if reason_node is None:
            reason = None
            why = "vouches without a reason= keyword: vouch() refuses it at run time"
        elif isinstance(reason_node, ast.Constant) and isinstance(reason_node.value, str):
            reason = reason_node.value
            why = f"vouches because: {_short(reason)}"
        else:
            reason = ast.unparse(reason_node)
            why = f"vouches with a computed reason: {_short(reason)}"
        label = policy if policy is not None else "an unnamed policy"
        self._add(call, "vouch", False, f"{label} {why}", policy=policy, reason=reason)

    def _add(
        self,
        node: ast.expr,
        kind: HatchKind,
        finding: bool,
        why: str,
        *,
        policy: str | None = None,
        reason: str | None = None,
    ) -> None:
        text = _short(ast.unparse(node))
        self.found.append(
            Hatch(self.filename, node.lineno, kind, text, finding, why, policy, reason)
        )

    def _literal_parameters(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> dict[str, frozenset[str]]:
        found: dict[str, frozenset[str]] = {}
        arguments = function.args
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            annotation = argument.annotation
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                annotation = _string_annotation(annotation.value)
            if not isinstance(annotation, ast.Subscript):
                continue
            qualified = self._resolve(annotation.value)
            if qualified is None or _last(qualified) != "Literal":
                continue
            inner = annotation.slice
            items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            values = [i.value for i in items if isinstance(i, ast.Constant)]
            if values and len(values) == len(items) and all(isinstance(v, str) for v in values):
                found[argument.arg] = frozenset(str(v) for v in values)
        return found

    def _resolve(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant):
            return None  # a string is a type only where a type goes: _mentions_brand reads it
        return _qualified(node, self.aliases, self.constants.get)

    def _computed_veridic_name(self, node: ast.Call | ast.Subscript) -> bool:
        """``getattr(veridic, name)``, ``vars(veridic)[name]`` or ``veridic.__dict__[name]``
        (or of a module of veridic) with a name the source does not fix: any of veridic's
        names, TrustPolicy among them."""
        lookup = _lookup(node, self.aliases)
        if lookup is None:
            return False
        holder, key = lookup
        module = self._resolve(holder)
        fixed = _string_values(key, self.constants.get)
        return fixed is None and module is not None and module.split(".")[0] == "veridic"

    def _is_policy_name(self, node: ast.Name) -> bool:
        qualified = self.aliases.get(node.id, node.id)
        return _last(qualified) == "TrustPolicy"

    def _policy_call(self, node: ast.expr | None) -> ast.Call | None:
        if not isinstance(node, ast.Call):
            return None
        qualified = self._resolve(node.func)
        return node if qualified is not None and _last(qualified) == "TrustPolicy" else None


_VALUE_HOLDERS: Final = (
    ast.Return,
    ast.Yield,
    ast.YieldFrom,
    ast.Lambda,
    ast.NamedExpr,
    ast.Starred,
    ast.Dict,
    ast.Set,
    ast.List,
    ast.Tuple,
    ast.IfExp,
    ast.BoolOp,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.arguments,
)
"""Where a brand is a value that something may call: returned, stored, a default."""

_TYPE_TAKERS: Final = frozenset(
    {
        "TypeVar",
        "NewType",
        "TypeAliasType",
        "assert_type",
        "get_args",
        "get_origin",
        "isinstance",
        "issubclass",
    }
)
"""Calls whose arguments are types, never called through."""

_LOOKERS: Final = frozenset(
    {
        "print",
        "repr",
        "str",
        "id",
        "hash",
        "callable",
        "dir",
        "vars",
        "signature",
        "getdoc",
        "getsource",
        "getmembers",
        "fields",
        "get_type_hints",
    }
)
"""Calls that show what they are given, never call it (``type`` is not one: of three
arguments it makes a subclass, a door of its own)."""

_ATTRIBUTE_READERS: Final = frozenset({"getattr", "hasattr", "setattr", "delattr"})
"""Calls whose first argument is the object whose attribute is read or set (``monkeypatch.
setattr`` among them); the value set, their third, is handed on."""


def _type_expression(node: ast.expr, parents: dict[int, ast.AST]) -> ast.expr:
    """The type expression around ``node``: ``list[X]``, ``X | None``, ``Callable[[str], X]``.

    A list or tuple is part of it only inside a subscript (``[str]`` in
    ``Callable[[str], X]``); ``[X]`` alone is a list holding the value.
    """
    current = node
    while True:
        parent = parents.get(id(current))
        if not isinstance(parent, ast.Subscript | ast.BinOp | ast.Tuple | ast.List):
            return current
        union = isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.BitOr)
        inside = isinstance(parent, ast.Tuple | ast.List) and _in_subscript(parent, parents)
        if not (isinstance(parent, ast.Subscript) or union or inside):
            return current
        current = parent


def _bound_to_text(tree: ast.Module) -> frozenset[str]:
    """Names only ever assigned a string: a brand spelt in one is a type alias, not a value.

    A name bound any other way too (imported, assigned an expression) may hold the
    brand itself where it is used: the scan reads no scopes, so a string bound to
    the same name in another function must not hide ``map(T, texts)`` of an
    imported ``T``.
    """
    text: set[str] = set()
    other: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            other.update((a.asname or a.name).partition(".")[0] for a in node.names)
        for target, value in _bound_names(node):
            if isinstance(target, ast.Name):
                is_text = isinstance(value, ast.Constant) and isinstance(value.value, str)
                (text if is_text else other).add(target.id)
    return frozenset(text - other)


def _own_names(tree: ast.Module, aliases: dict[str, str]) -> frozenset[str]:
    """Names the module binds itself and never to a hatch: a parameter or a variable
    spelt ``TrustPolicy`` holds the module's own value, not veridic's class.

    A module with a ``*`` import may have its names from veridic, so it has none of its
    own here; a name also imported, or bound to a hatch (an alias), is not one either.
    """
    if any(
        isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
        for node in ast.walk(tree)
    ):
        return frozenset()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
    return frozenset(name for name in bound if name not in aliases)


def _in_subscript(node: ast.expr, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(node))
    while isinstance(parent, ast.Tuple | ast.List):
        parent = parents.get(id(parent))
    return isinstance(parent, ast.Subscript)


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted name, from every import in the module and every hatch renamed.

    A name bound to ``cast``, a brand or ``TrustPolicy`` (``Policy = TrustPolicy``,
    ``Trusted: TypeAlias = TrustedInstruction``, ``c = typing.cast``) is the same
    hatch under another name: mypy follows it, so the scan must too.
    """
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            # A relative import is followed by mypy as any other: from .types import
            # TrustPolicy as P makes P("evil") a trust policy.
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{module}.{alias.name}".lstrip(".")
    _renamed_hatches(tree, aliases)
    return aliases


def _renamed_hatches(tree: ast.Module, aliases: dict[str, str]) -> None:
    """Add to ``aliases`` each name assigned a hatch (a chain of them too: ``A = B = cast``)."""
    renames = [
        (target.id, value)
        for node in ast.walk(tree)
        for target, value in _bound_names(node)
        if isinstance(target, ast.Name)
    ] + [  # class P(TrustPolicy): P("x") makes a policy as TrustPolicy("x") does
        (node.name, base)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for base in node.bases
    ]
    constants = _module_constants(tree)
    changed = True
    while changed:  # a chain resolves one link a pass; each pass adds a name or stops
        changed = False
        for name, value in renames:
            qualified = _qualified(value, aliases, constants.get)
            if name not in aliases and qualified is not None and _is_hatch_name(qualified):
                aliases[name] = qualified
                changed = True


def _bound_names(node: ast.AST) -> Iterator[tuple[ast.expr, ast.expr]]:
    """``(target, value)`` of a plain or annotated assignment, or of a ``type`` statement."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield target, node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        yield node.target, node.value
    elif type(node).__name__ == "TypeAlias":  # ``type X = ...``: ast.TypeAlias, Python 3.12+
        name, value = getattr(node, "name", None), getattr(node, "value", None)
        if isinstance(name, ast.expr) and isinstance(value, ast.expr):
            yield name, value


def _qualified(
    node: ast.expr,
    aliases: dict[str, str],
    lookup: Callable[[str], frozenset[str] | None] = lambda _: None,
) -> str | None:
    """The dotted name ``node`` refers to (a name, an attribute, or a string holding one).

    Also what a name fixed in the source reaches another way, as mypy follows it (or
    types it ``Any``) and the run time calls it: ``getattr(veridic, "TrustPolicy")``,
    ``vars(veridic)["TrustPolicy"]``, ``veridic.__dict__["TrustPolicy"]``, and an
    attribute of what the scan cannot name (``__import__("veridic").TrustPolicy``,
    ``importlib.import_module("veridic").TrustPolicy``), which the name decides, as
    it does for an import. An attribute spelt as a name bound to a hatch in the module
    (``class K: P = TrustPolicy``, then ``K.P("x")``) is that hatch. ``lookup`` gives
    the strings a name of the module is fixed to (``getattr(veridic, NAME)``).
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        parsed = _string_annotation(node.value)
        if parsed is None:
            return None
        node = parsed
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _qualified(node.value, aliases, lookup)
        qualified = node.attr if base is None else f"{base}.{node.attr}"
        renamed = aliases.get(node.attr)
        if renamed is not None and _is_hatch_name(renamed) and not _is_hatch_name(qualified):
            return renamed
        return qualified
    reached = _reached_by_name(node, aliases, lookup)
    if reached is None:
        return None
    holder, name = reached
    base = _qualified(holder, aliases, lookup) if not isinstance(holder, ast.Constant) else None
    return name if base is None else f"{base}.{name}"


def _reached_by_name(
    node: ast.expr, aliases: dict[str, str], lookup: Callable[[str], frozenset[str] | None]
) -> tuple[ast.expr, str] | None:
    """``(holder, name)`` of ``getattr(holder, name)``, ``vars(holder)[name]`` or
    ``holder.__dict__[name]`` whose name is fixed in the source (a hatch's name first, of
    several a condition picks from), else ``None``."""
    found = _lookup(node, aliases)
    if found is None:
        return None
    holder, key = found
    names = _string_values(key, lookup)
    if not names:
        return None
    return holder, min(names, key=lambda name: (not _is_hatch_name(name), name))


def _lookup(node: ast.expr, aliases: dict[str, str]) -> tuple[ast.expr, ast.expr] | None:
    """``(holder, key)`` of ``getattr(holder, key)``, ``vars(holder)[key]`` or
    ``holder.__dict__[key]``: a name read from ``holder`` by a key, else ``None``."""
    if isinstance(node, ast.Call) and _builtin(node.func, aliases, "getattr"):
        return (node.args[0], node.args[1]) if len(node.args) >= 2 else None
    if not isinstance(node, ast.Subscript):
        return None
    outer = node.value
    if isinstance(outer, ast.Call) and _builtin(outer.func, aliases, "vars") and outer.args:
        return outer.args[0], node.slice
    if isinstance(outer, ast.Attribute) and outer.attr == "__dict__":
        return outer.value, node.slice
    return None


def _builtin(node: ast.expr, aliases: dict[str, str], name: str) -> bool:
    """Whether ``node`` names the built-in ``name`` (``getattr``, ``builtins.getattr``)."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id) in (name, f"builtins.{name}")
    return (
        isinstance(node, ast.Attribute)
        and node.attr == name
        and isinstance(node.value, ast.Name)
        and aliases.get(node.value.id, node.value.id) == "builtins"
    )


def _string_annotation(text: str) -> ast.expr | None:
    """The expression a string annotation holds (``"list[TrustedInstruction]"``), or ``None``.

    Any string may stand where a type goes. One that is not an expression, or
    that cannot even be encoded (a lone surrogate, ``"\\ud800"``, which Python
    accepts in a literal and ``ast.parse`` refuses with a ``ValueError``), names
    no hatch, and must not stop the scan of a valid file with a traceback.
    """
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None


def _is_hatch_name(qualified: str) -> bool:
    """``cast``, a brand or ``TrustPolicy``: a name whose calls the scan reports."""
    return _is_cast(qualified) or _is_brand(qualified) or _last(qualified) == "TrustPolicy"


def _mentions_brand(node: ast.expr, resolve: Callable[[ast.expr], str | None]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            parsed = _string_annotation(sub.value)
            if parsed is not None and _mentions_brand(parsed, resolve):
                return True
        elif isinstance(sub, ast.Name | ast.Attribute):
            qualified = resolve(sub)
            if qualified is not None and _is_brand(qualified):
                return True
    return False


def _is_policy(qualified: str) -> bool:
    """``TrustPolicy`` by its name, wherever it was imported from (see :func:`_is_brand`)."""
    return _last(qualified) == "TrustPolicy"


def _is_cast(qualified: str) -> bool:
    """A function named ``cast``, wherever it was imported from (see :func:`_is_brand`)."""
    return _last(qualified) == "cast"


def _is_brand(qualified: str) -> bool:
    """A brand by its name, wherever it was imported from.

    A module of the project may re-export veridic's names (``app/types.py``:
    ``from veridic import TrustedInstruction``), and mypy follows the
    re-export; the scan reads one file at a time and cannot, so the name
    decides, as it does for ``TrustPolicy`` and ``cast``. So another library's
    name that is spelt the same is read as veridic's (preferring a false
    alarm, which a reviewer sees, to a hatch nobody sees).
    """
    return _last(qualified) in _BRANDS


def _last(qualified: str) -> str:
    return qualified.rpartition(".")[2]


def _string_values(
    node: ast.expr, lookup: Callable[[str], frozenset[str] | None]
) -> frozenset[str] | None:
    """The strings ``node`` can evaluate to, when the source fixes them (else ``None``).

    Literals, ``+`` of such, ``a if c else b`` of such, and names that ``lookup``
    knows (module constants, ``Literal[...]`` parameters): what the mypy plugin
    accepts as "written in code" within one module.
    """
    if isinstance(node, ast.Constant):
        return frozenset({node.value}) if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_values(node.left, lookup), _string_values(node.right, lookup)
        if left is None or right is None:
            return None
        return frozenset(a + b for a in left for b in right)
    if isinstance(node, ast.IfExp):
        body, orelse = _string_values(node.body, lookup), _string_values(node.orelse, lookup)
        return None if body is None or orelse is None else body | orelse
    if isinstance(node, ast.Name):
        return lookup(node.id)
    return None


def _module_constants(tree: ast.Module) -> dict[str, frozenset[str]]:
    """Module-level names bound once, to a string fixed in the source."""
    bound: dict[str, list[ast.expr | None]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(statement.value)
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            bound.setdefault(statement.target.id, []).append(statement.value)
    constants: dict[str, frozenset[str]] = {}
    for name, values in bound.items():
        value = values[0]
        if len(values) == 1 and value is not None:
            found = _string_values(value, constants.get)
            if found is not None:
                constants[name] = found
    return constants


def _type_ignores(source: str, filename: str) -> Iterator[Hatch]:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        if _BARE_IGNORE.search(token.string):
            yield Hatch(
                filename,
                token.start[0],
                "type-ignore",
                _short(token.string),
                False,
                "a bare type: ignore silences every check on this line, veridic's included: "
                "name the error code (mypy's ignore-without-code makes this an error)",
            )
        for match in _IGNORE.finditer(token.string):
            codes = [code.strip() for code in match.group(1).split(",")]
            ours = _ours(codes)
            if ours:
                yield Hatch(
                    filename,
                    token.start[0],
                    "type-ignore",
                    _short(token.string),
                    False,
                    f"silences the veridic check {', '.join(ours)} on this line",
                    codes=ours,
                )


# --- mypy's configuration: inline comments and files -----------------------------------------

_PLUGIN: Final = "veridic.mypy"


def _ours(codes: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(code for code in codes if code.startswith("veridic-")))


def _checks(codes: tuple[str, ...]) -> str:
    return f"check{'s' if len(codes) > 1 else ''} {', '.join(codes)}"


def _inline_configuration(source: str, filename: str) -> Iterator[Hatch]:
    """``# mypy: ...`` lines that turn veridic's checks off for the whole file.

    Read by mypy's own parser when mypy is importable
    (:func:`veridic.checks._mypy_settings.inline_directives`): a line that starts with
    exactly ``# mypy: `` (wherever it is, even inside a string), options split
    at commas outside double quotes, ``-`` and ``_`` alike, names in any case.
    So ``disable-error-code=veridic-literal,veridic-forge`` without quotes
    turns off only ``veridic-literal`` (mypy reads ``veridic-forge`` as an
    unknown option), and only that is reported; a code that another comment
    of the file enables again is not reported, and of several comments setting
    ``ignore-errors`` only the last counts.
    """
    for directive in _mypy_settings.inline_directives(source):
        text = _short(directive.text)
        ours = _ours(directive.disabled)
        if ours:
            yield Hatch(
                filename,
                directive.line,
                "inline-disable-code",
                text,
                False,
                f"turns off the veridic {_checks(ours)} for every line of this file",
                codes=ours,
            )
        if directive.ignores:
            yield Hatch(
                filename,
                directive.line,
                "inline-ignore-errors",
                text,
                False,
                "silences every mypy error in this file, veridic's checks included",
            )


def scan_mypy_config(directory: str | os.PathLike[str]) -> tuple[Hatch, ...]:
    """The hatches in the mypy configuration that mypy would use when run from ``directory``.

    mypy's own search: in ``directory``, then in each parent up to the
    repository root (the first directory holding ``.git`` or ``.hg``), the
    first of ``mypy.ini``, ``.mypy.ini``, ``pyproject.toml`` (with
    ``[tool.mypy]``) and ``setup.cfg`` (with ``[mypy]``). A file that does not
    parse is a finding, and the search goes on, as mypy's does. Not read: the
    per-user files (``~/.config/mypy/config``...), which are not part of the
    project, and a ``--config-file`` given on mypy's command line. No
    configuration found means nothing to report (the project may not use mypy).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as root:
    ...     _ = Path(root, ".git").mkdir()
    ...     _ = Path(root, "mypy.ini").write_text("[mypy]\\nstrict = True\\n")
    ...     [(hatch.kind, hatch.line) for hatch in scan_mypy_config(root)]
    [('plugin-missing', 1)]
    """
    found: list[Hatch] = []
    for path in _mypy_settings.config_candidates(Path(os.path.abspath(directory))):
        try:
            sections = _mypy_settings.read_config(path)
        except _mypy_settings.ConfigError as error:
            found.append(_config_unparsable(path, error))
            continue
        if sections is not None:
            found.extend(_config_hatches(path, sections))
            break
    return tuple(found)


def _config_hatches(path: Path, sections: tuple[_mypy_settings.Section, ...]) -> list[Hatch]:
    file = _display(path)
    found: list[Hatch] = []
    main = next((s for s in sections if s.modules is None), None)
    plugins = main.plugins if main is not None else ()
    if not any(p == _PLUGIN or p.startswith(f"{_PLUGIN}:") for p in plugins):
        toml = path.name.lower().endswith(".toml")
        example = f'plugins = ["{_PLUGIN}"]' if toml else f"plugins = {_PLUGIN}"
        if main is None:
            line, text = 1, f"{path.name}: no [mypy] section"
            what = "has no [mypy] section, so mypy loads no plugin"
        else:
            line = main.lines.get("plugins", main.line)
            shown = main.shown.get("plugins")
            text = f"{main.title} plugins = {shown}" if shown else f"{main.title} (no plugins)"
            listed = ", ".join(p for p in plugins if p)
            what = f"loads {f'the plugins {listed}' if listed else 'no plugins'}, not {_PLUGIN}"
        found.append(
            Hatch(
                file,
                line,
                "plugin-missing",
                _short(text),
                True,
                f"mypy reads this configuration (the first it finds from the directory "
                f"scanned), which {what}, so "
                "none of veridic's static checks (veridic-literal, veridic-forge, veridic-any, "
                f"veridic-launder, veridic-policy, veridic-sdk) run: add {example} to "
                f"{main.title if main is not None else '[mypy]'}",
            )
        )
    for section in sections:
        scope = (
            "every module mypy checks"
            if section.modules is None
            else f"the modules matching {', '.join(section.scope)}"
        )
        ours = _ours(section.disabled)
        if ours:
            found.append(
                Hatch(
                    file,
                    section.lines.get("disable_error_code", section.line),
                    "config-disable-code",
                    _short(
                        f"{section.title} disable_error_code = "
                        f"{section.shown.get('disable_error_code', '')}"
                    ),
                    False,
                    f"{section.title} turns off the veridic {_checks(ours)} for {scope}",
                    codes=ours,
                )
            )
        key = section.ignores
        if key is not None:
            found.append(
                Hatch(
                    file,
                    section.lines.get(key, section.line),
                    "config-ignore-errors",
                    _short(f"{section.title} {key} = {section.shown.get(key, '')}"),
                    False,
                    f"{section.title} silences every mypy error in {scope}, veridic's checks "
                    "included",
                )
            )
    return found


def _config_unparsable(path: Path, error: _mypy_settings.ConfigError) -> Hatch:
    said = " ".join(str(error).split())
    if error.not_regular:
        why = (
            f"mypy would read this configuration ({said}): its reading never ends (a "
            "device) or never starts (a FIFO), so mypy checks nothing, veridic's checks "
            "included: make it a regular file holding mypy's configuration"
        )
    elif error.crashes:
        why = (
            f"mypy's configuration parser crashes on this file ({said}), so mypy stops "
            "before checking anything, veridic's checks included: fix the value it fails on "
            "so that mypy reads the file"
        )
    else:
        why = (
            f"mypy cannot parse this configuration file ({said}): it prints the error, skips "
            "the file and uses the next configuration it finds (or none), so the settings "
            f"here, the {_PLUGIN} plugin among them, may not apply: fix the file so that "
            "mypy reads it"
        )
    return Hatch(
        _display(path), error.line or 1, "config-unparsable", _short(str(error)), True, why
    )


def _unparsable(filename: str, line: int, error: Exception) -> Hatch:
    return Hatch(
        filename,
        line,
        "unparsable",
        _short(f"{type(error).__name__}: {error}"),
        True,
        "this file could not be read as Python, so its escape hatches cannot be listed: "
        "fix the file or leave it out of the paths given to veridic hatches",
    )


def _shadowed(path: Path) -> Iterator[Hatch]:
    """A ``.py`` module with a ``.pyi`` stub beside it, which mypy reads instead.

    ``mypy app`` then checks none of the module's code, veridic's checks included
    ("Success"), unless the ``.py`` file is named on mypy's command line: one file added
    beside a module turns off every static check of it, as ``# mypy: ignore-errors``
    does. Listed, like that comment: a stub may be kept on purpose, after review.
    """
    stub = path.with_suffix(".pyi")
    if path.suffix != ".py" or not stub.is_file():
        return
    yield Hatch(
        _display(path),
        1,
        "stub-shadows",
        _short(f"{path.name} shadowed by {stub.name}"),
        False,
        f"mypy reads the stub {_display(stub)} instead of this module, and checks none of "
        "this module's code, veridic's checks included (unless this file is named on "
        "mypy's command line): delete the stub, or keep it after review and check the "
        "module by name",
    )


def _too_deep(filename: str, error: RecursionError) -> Hatch:
    """A file whose expressions nest deeper than Python's parser (or the scan) goes.

    ``ast.parse`` gives up on ``"a" + "a" + ...`` of some thousands of terms with a
    ``RecursionError``, no ``SyntaxError``: it ended the scan with a traceback, whose
    exit code 1 reads as "findings" to a CI step that tells 1 from 2.
    """
    return Hatch(
        filename,
        1,
        "unparsable",
        _short(f"{type(error).__name__}: {error}"),
        True,
        "this file's expressions are nested too deeply for Python's parser (Python cannot "
        "compile it either), so its escape hatches cannot be listed: split the expression, "
        "or leave the file out of the paths given to veridic hatches",
    )


def _short(text: str) -> str:
    """One line of at most ``_SHORT`` characters, for display."""
    line = " ".join(text.split())
    return line if len(line) <= _SHORT else line[: _SHORT - 1] + "…"


def _python_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    """The ``.py`` files of ``paths``, each real file once (given twice, or reached through a
    symbolic or hard link as well: its hatches were listed and counted twice).

    Raises:
        VeridicError: a path is neither a file nor a directory, or is a directory that
            holds no Python file and no mypy configuration file of its own (one that does
            is given for its configuration): a check that read nothing does not pass.
    """
    seen: set[object] = set()
    for given in paths:
        path = Path(given)
        if path.is_file():
            _require_python(path, given)
            found: Iterable[Path] = (path,)
        elif path.is_dir():
            found = list(_walk(path))
            if not found and not _holds_config(path):
                raise VeridicError(
                    f"veridic hatches: {os.fspath(given)!r} holds no Python file (.py, .pyi) and "
                    f"no mypy configuration (looked from {Path.cwd()}; hidden folders, and "
                    "build, dist and the like outside a package, are skipped), so nothing of "
                    "it could be checked: pass the directories that hold the application's code"
                )
        else:
            raise VeridicError(
                f"veridic hatches: {os.fspath(given)!r} is neither a file nor a directory "
                f"(looked from {Path.cwd()}): pass paths of Python files or of directories "
                "that hold them"
            )
        for file in found:
            same = _same_file(file)
            if same not in seen:
                seen.add(same)
                yield file


_PYTHON_SUFFIXES: Final = (".py", ".pyi", ".pyw")


def _require_python(path: Path, given: str | os.PathLike[str]) -> None:
    """Refuse a file given by name that is not Python source: one with a module's suffix,
    or a Python ``#!`` line whatever its suffix or none (a script such as ``manage``;
    what pre-commit's ``types: [python]`` passes too, as ``tool.cgi``).

    Any other file was parsed as Python all the same, and a configuration often parses
    (``[mypy]`` is a list, ``disable_error_code = veridic-provenance`` a subtraction):
    ``veridic hatches mypy.ini`` passed, having read nothing of what the file turns off.
    A file with no suffix is no exception: ``.python-version`` holding ``3.12`` parsed.
    """
    if path.suffix in _PYTHON_SUFFIXES or _python_script(path):
        return
    if path.name in _mypy_settings.CONFIG_NAMES:
        instead = (
            "mypy's configuration is read from the folders given: pass its folder "
            f"(veridic hatches {os.fspath(path.parent)})"
        )
    else:
        instead = "pass Python files (.py, .pyi) or the directories that hold them"
    why = (
        f"its suffix is {path.suffix!r}"
        if path.suffix
        else "it has no suffix and no Python #! line"
    )
    raise VeridicError(
        f"veridic hatches: {os.fspath(given)!r} is not a Python file ({why}), so nothing of "
        f"it would be checked: {instead}"
    )


_PYTHONS: Final = frozenset({"python", "python2", "python3"})
"""The interpreters whose ``#!`` line pre-commit's ``types: [python]`` passes, each also
with its version (``python3.12``) or ``.exe`` after it."""


def _python_script(path: Path) -> bool:
    """Whether ``path`` starts with a ``#!`` line that runs Python; one that cannot be read
    is left to the scan, which says so."""
    try:
        with path.open("rb") as file:
            first = file.readline(256)
    except OSError:
        return True
    if not first.startswith(b"#!"):
        return False
    return _runs_python(_words(first[2:].decode("utf-8", "replace")))


def _words(line: str) -> list[str]:
    """A ``#!`` line's words, a quoted one whole: pip quotes a path with a space in it
    (``#!"C:\\Program Files\\Python312\\python.exe"``) and leaves its backslashes, so
    they are no escapes here. A line with a quote left open is split at its spaces."""
    splitter = shlex.shlex(line, posix=False)
    splitter.whitespace_split = True
    try:
        return [word.strip("\"'") for word in splitter]
    except ValueError:
        return line.split()


def _runs_python(words: list[str]) -> bool:
    """Whether a ``#!`` line's words run Python: the program it names (or ``env`` names,
    past its options and settings), by its last path part, less any ``.`` suffixes.

    Any line holding ``python`` passed: ``#!/usr/bin/env ipython`` (its ``%`` magics are
    no Python) and ``#!/opt/python-tools/bin/bash`` were read as Python. Jython and
    IronPython are not passed either: they read another language's version of it.
    """
    names = [_program(word) for word in words]
    if names[:1] == ["env"]:
        names = [name for name in names[1:] if not name.startswith("-") and "=" not in name]
    name = names[0] if names else ""
    while name and name not in _PYTHONS:
        name = name.rpartition(".")[0]
    return bool(name)


def _program(word: str) -> str:
    """The last part of a path in a ``#!`` line, with ``/`` or ``\\`` between its parts."""
    return word.replace("\\", "/").rpartition("/")[2]


def _same_file(file: Path) -> object:
    """What tells ``file`` apart from every other file: its device and inode.

    Its resolved path did not: a hard link resolves to itself, and so does a name in
    another case on a file system that ignores case (macOS, Windows), so each was read as
    a file of its own. A file that cannot be looked at (a link to nothing) and a file
    system that gives no inode (0) fall back to the path; reading it says what is wrong.
    """
    try:
        status = file.stat()
    except OSError:
        return file.resolve()
    return (status.st_dev, status.st_ino) if status.st_ino else file.resolve()


def _holds_config(directory: Path) -> bool:
    """Whether ``directory`` holds a file mypy may read its configuration from."""
    return any((directory / name).is_file() for name in _mypy_settings.CONFIG_NAMES)


def _walk(directory: Path) -> Iterator[Path]:
    """The ``.py`` and ``.pyi`` files under ``directory``, entering folders that are
    symbolic links.

    Python imports through a linked folder (``app/util`` -> ``../.tools/util``),
    and so does mypy, so its code is the application's wherever the link points:
    not following it let a cast hide in a folder the walk skips. Each real
    folder is entered once, so a link back up the tree ends the descent.
    """
    entered: set[Path] = set()
    for root, dirs, files in os.walk(directory, followlinks=True):
        real = Path(root).resolve()
        if real in entered:
            dirs[:] = []
            continue
        entered.add(real)
        dirs[:] = sorted(d for d in dirs if not _skipped(Path(root, d)))
        for name in sorted(files):
            if name.endswith(_WALKED_SUFFIXES):
                yield Path(root, name)


_WALKED_SUFFIXES: Final = (".py", ".pyi")
"""What mypy reads in a folder: modules and stubs (a stub instead of its module)."""


def _skipped(directory: Path) -> bool:
    """A hidden directory, or a ``build``/``dist``/... folder that is not part of a package.

    Those names usually hold copies and downloads, but a package may be called
    ``build`` too (``myapp/build/__init__.py``), and a folder without an
    ``__init__.py`` inside a package is importable as well (``myapp/build/x.py``
    is ``myapp.build.x``, a namespace package): the hatches of either are the
    application's, so a folder with an ``__init__.py``, or whose parent has
    one, is always scanned.
    """
    if directory.name.startswith("."):
        return True
    if directory.name not in _SKIPPED_DIRS:
        return False
    return not any((folder / "__init__.py").is_file() for folder in (directory, directory.parent))


def _read(path: Path) -> str:
    """The file's text, decoded as Python decodes it.

    Raises what Python's import would refuse the file for: ``SyntaxError`` for
    an unknown encoding, ``LookupError`` for a codec that is not a text
    encoding (``# coding: rot13``), ``UnicodeDecodeError`` for bytes it
    cannot decode; and ``NotRegularFileError`` (an ``OSError``) for a name
    ending in ``.py`` that is a FIFO or a link to a device, which Python could
    not import either and whose text may never end.
    """
    data = read_regular(path)
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return io.TextIOWrapper(io.BytesIO(data), encoding=encoding).read()


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _is_inside_veridic(path: Path) -> bool:
    return path.resolve().is_relative_to(_PACKAGE)
