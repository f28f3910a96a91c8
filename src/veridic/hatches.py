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
                     constructor, an identity that mints nothing veridic
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
===================  ==========================================  ===============

A policy name is "fixed in the module" as the ``veridic.mypy`` plugin reads it:
a literal, ``+`` or ``x if c else y`` of literals, a str constant bound once at
module level, or a ``Literal[...]`` parameter. One difference: a constant
imported from another module is a finding here, since each file is read alone.

A cast or a constructor call forges the static brand without run-time
provenance: mypy believes the text is trusted while the composer refuses it,
so the two checks disagree. The package's own modules are the minting
authority, so what they do is listed, not flagged.

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
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from veridic.errors import VeridicError

__all__ = ["Hatch", "HatchKind", "find_hatches", "scan_source"]

HatchKind = Literal[
    "cast-to-brand", "brand-call", "trust-policy", "vouch", "type-ignore", "unparsable"
]

_BRANDS: Final = frozenset({"TrustedInstruction", "UntrustedText"})
_CAST_MODULES: Final = frozenset({"", "typing", "typing_extensions"})
_SKIPPED_DIRS: Final = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})
_IGNORE: Final = re.compile(r"type:\s*ignore\[([^\]]*)\]")
_BARE_IGNORE: Final = re.compile(r"type:\s*ignore(?![\[\w-])")
_PACKAGE: Final = Path(__file__).resolve().parent
_SHORT: Final = 100
_INSIDE: Final = "inside the veridic package, which is the minting authority: listed, not a finding"


@dataclass(frozen=True, slots=True)
class Hatch:
    """One escape hatch at ``file:line``.

    ``finding`` tells a failure (the command exits 1) from an item that is only
    listed for review. ``why`` says what is wrong and what to do instead for a
    finding, and what the item means for a listed one. ``policy`` and
    ``reason`` are set for trust policies and vouches when the source names
    them (``None`` when it does not, e.g. a computed name).
    """

    file: str
    line: int
    kind: HatchKind
    text: str
    finding: bool
    why: str
    policy: str | None = None
    reason: str | None = None


def find_hatches(
    paths: Iterable[str | os.PathLike[str]],
    *,
    trust_policies: frozenset[str] | None = None,
) -> tuple[Hatch, ...]:
    """Scan every ``.py`` file under ``paths`` (files or directories).

    ``trust_policies`` is the configured list of policy names (``None``: any
    name is allowed, but a computed name is still a finding). Directories are
    walked recursively, skipping hidden ones, ``__pycache__``, ``build``,
    ``dist``, ``node_modules`` and ``site-packages``. The result is sorted by
    file and line.

    Raises:
        VeridicError: a path does not exist.
    """
    found: list[Hatch] = []
    for path in _python_files(paths):
        try:
            source = _read(path)
        except (OSError, UnicodeDecodeError, SyntaxError) as error:
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
    """The hatches of one module's source text; ``filename`` is only for display."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as error:
        return (_unparsable(filename, error.lineno or 1, error),)
    scanner = _Scanner(filename, _aliases(tree), trust_policies, inside_veridic)
    scanner.scan(tree)
    return (*scanner.found, *_type_ignores(source, filename))


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
            if isinstance(node, ast.Call):
                self._call(node)

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
                try:
                    annotation = ast.parse(annotation.value, mode="eval").body
                except SyntaxError:
                    continue
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
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def _is_policy_name(self, node: ast.Name) -> bool:
        qualified = self.aliases.get(node.id, node.id)
        return _last(qualified) == "TrustPolicy" and _is_veridic_or_bare(qualified)

    def _policy_call(self, node: ast.expr | None) -> ast.Call | None:
        if not isinstance(node, ast.Call):
            return None
        qualified = self._resolve(node.func)
        if qualified is None or _last(qualified) != "TrustPolicy":
            return None
        return node if _is_veridic_or_bare(qualified) else None


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted name, from every import in the module."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _mentions_brand(node: ast.expr, resolve: Callable[[ast.expr], str | None]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                parsed = ast.parse(sub.value.strip(), mode="eval")
            except SyntaxError:
                continue
            if _mentions_brand(parsed.body, resolve):
                return True
        elif isinstance(sub, ast.Name | ast.Attribute):
            qualified = resolve(sub)
            if qualified is not None and _is_brand(qualified):
                return True
    return False


def _is_cast(qualified: str) -> bool:
    module, _, name = qualified.rpartition(".")
    return name == "cast" and module in _CAST_MODULES


def _is_brand(qualified: str) -> bool:
    return _last(qualified) in _BRANDS and _is_veridic_or_bare(qualified)


def _is_veridic_or_bare(qualified: str) -> bool:
    module = qualified.rpartition(".")[0]
    return module == "" or module == "veridic" or module.startswith("veridic.")


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
            ours = [code for code in codes if code.startswith("veridic-")]
            if ours:
                yield Hatch(
                    filename,
                    token.start[0],
                    "type-ignore",
                    _short(token.string),
                    False,
                    f"silences the veridic check {', '.join(ours)} on this line",
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


def _short(text: str) -> str:
    """One line of at most ``_SHORT`` characters, for display."""
    line = " ".join(text.split())
    return line if len(line) <= _SHORT else line[: _SHORT - 1] + "…"


def _python_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    for given in paths:
        path = Path(given)
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from _walk(path)
        else:
            raise VeridicError(
                f"veridic hatches: {os.fspath(given)!r} is neither a file nor a directory "
                f"(looked from {Path.cwd()}): pass paths of Python files or of directories "
                "that hold them"
            )


def _walk(directory: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(root, name)


def _read(path: Path) -> str:
    with path.open("rb") as handle:
        encoding, _ = tokenize.detect_encoding(handle.readline)
    return path.read_text(encoding=encoding)


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _is_inside_veridic(path: Path) -> bool:
    return path.resolve().is_relative_to(_PACKAGE)
