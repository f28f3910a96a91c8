"""Generate src/veridic/_sdk_stubs/: overlay stubs that narrow the SDKs' instruction parameters.

Type checkers without plugins (pyright, basedpyright) read these stubs instead
of the installed SDK modules they cover, when ``stubPath`` points at a folder
``veridic stubs DIR`` wrote them to (see docs/providers.md): the wheel ships
them as package data, not modules. The narrowed positions are the ones the
``veridic.mypy`` plugin checks (``veridic-sdk``):

- anthropic ``messages`` (and ``beta.messages``) ``system=``: a
  ``TrustedInstruction``, or text blocks whose ``text`` is one;
- openai ``responses`` (and ``beta.responses``) ``instructions=``: a
  ``TrustedInstruction`` or ``None``;
- the system and developer message types themselves (openai
  ``ChatCompletionSystemMessageParam`` and ``ChatCompletionDeveloperMessageParam``,
  anthropic ``SystemMessageParam`` and ``BetaSystemMessageParam``): their
  ``content`` is a ``TrustedInstruction`` or text parts whose ``text`` is one,
  wherever such a message is built.

Each stub is the installed SDK module with its relative imports made absolute
(so they resolve through the stub folder first, then the installed package),
function bodies other than ``__init__`` dropped, docstrings dropped, and the
narrowing applied. The modules on the way from ``import openai`` to the narrowed ones
are copied too, because pyright follows a relative import next to the file
that makes it.

Usage::

    python scripts/generate_stubs.py            # rewrite _sdk_stubs/ from the installed SDKs
    python scripts/generate_stubs.py --check    # exit 1 and list the files that differ

tests/test_sdk_typecheck.py runs the check, so the stubs cannot fall behind the
SDK versions installed for the tests (the ``dev`` dependency group pins them).
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
STUBS: Final = ROOT / "src" / "veridic" / "_sdk_stubs"
TRUSTED: Final = "TrustedInstruction"
VERSIONS_FILE: Final = "VERSIONS"

Edit = Callable[[ast.Module], None]


@dataclass(frozen=True)
class Overlay:
    """One module to copy into the stubs, and the edits that narrow it."""

    module: str
    edits: tuple[Edit, ...] = field(default=())


# --- edits ---------------------------------------------------------------------------------


class _Rename(ast.NodeTransformer):
    """Replace names in an annotation: ``str`` by ``TrustedInstruction``, a type by its twin."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(self.names.get(node.id, node.id), node.ctx)


def narrow_parameters(
    resource: str, methods: frozenset[str], parameter: str, names: dict[str, str]
) -> Edit:
    """In the resource classes' ``methods``, rename types in ``parameter``'s annotation."""

    def edit(tree: ast.Module) -> None:
        found = 0
        for cls in _classes(tree):
            core = cls.name.removeprefix("Async")
            if core != resource:
                continue
            for node in cls.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
                    node.name in methods
                ):
                    for arg in (*node.args.args, *node.args.kwonlyargs):
                        if arg.arg == parameter and arg.annotation is not None:
                            arg.annotation = _Rename(names).visit(arg.annotation)
                            found += 1
        if not found:
            raise SystemExit(f"no {resource}.{sorted(methods)} takes {parameter}=: SDK changed?")

    return edit


def narrow_field(cls_name: str, field_name: str, names: dict[str, str]) -> Edit:
    """In TypedDict ``cls_name``, rename types in the annotation of ``field_name``."""

    def edit(tree: ast.Module) -> None:
        for cls in _classes(tree):
            if cls.name != cls_name:
                continue
            for node in cls.body:
                if (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and node.target.id == field_name
                ):
                    node.annotation = _Rename(names).visit(node.annotation)
                    return
        raise SystemExit(f"{cls_name} has no field {field_name}: SDK changed?")

    return edit


def narrow_alias(alias: str, names: dict[str, str]) -> Edit:
    """Rename types in the value of the type alias ``alias``."""

    def edit(tree: ast.Module) -> None:
        for node in tree.body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == alias
                and node.value is not None
            ):
                node.value = _Rename(names).visit(node.value)
                return
        raise SystemExit(f"no type alias {alias}: SDK changed?")

    return edit


def inline_trusted_copy(module: str, cls_name: str, new_name: str) -> Edit:
    """Append a copy of TypedDict ``cls_name`` of ``module`` whose ``text`` is trusted."""

    def edit(tree: ast.Module) -> None:
        source = _parse(module)
        imports = [n for n in source.body if isinstance(n, ast.Import | ast.ImportFrom)]
        imports = [n for n in imports if not _is_future(n)]
        original = next((c for c in _classes(source) if c.name == cls_name), None)
        if original is None:
            raise SystemExit(f"{module} has no {cls_name}: SDK changed?")
        copy = ast.parse(ast.unparse(original)).body[0]
        assert isinstance(copy, ast.ClassDef)
        copy.name = new_name
        _insert_imports(tree, imports)
        tree.body.append(copy)
        narrow_field(new_name, "text", {"str": TRUSTED})(tree)

    return edit


def import_names(module: str, *names: str) -> Edit:
    def edit(tree: ast.Module) -> None:
        _insert_imports(
            tree, [ast.ImportFrom(module, [ast.alias(name, name) for name in names], 0)]
        )

    return edit


TRUSTED_IMPORT: Final = import_names("veridic.text.provenance", TRUSTED)

# --- what is overlaid --------------------------------------------------------------------------

_ANTHROPIC_METHODS: Final = frozenset({"create", "stream", "parse", "tool_runner"})
_RESPONSES_METHODS: Final = frozenset({"create", "stream", "parse"})
_SYSTEM: Final = "anthropic.types.system_message_param"
_BETA_SYSTEM: Final = "anthropic.types.beta.beta_system_message_param"
_CHAT_SYSTEM: Final = "openai.types.chat.chat_completion_system_message_param"

OVERLAYS: Final = {
    "anthropic": (
        Overlay("anthropic"),
        Overlay("anthropic._client"),
        Overlay("anthropic.resources"),
        Overlay("anthropic.resources.messages"),
        Overlay(
            "anthropic.resources.messages.messages",
            (
                TRUSTED_IMPORT,
                import_names(_SYSTEM, "TrustedTextBlockParam"),
                narrow_parameters(
                    "Messages",
                    _ANTHROPIC_METHODS,
                    "system",
                    {"str": TRUSTED, "TextBlockParam": "TrustedTextBlockParam"},
                ),
            ),
        ),
        Overlay("anthropic.resources.beta"),
        Overlay("anthropic.resources.beta.beta"),
        Overlay("anthropic.resources.beta.messages"),
        Overlay(
            "anthropic.resources.beta.messages.messages",
            (
                TRUSTED_IMPORT,
                import_names(_BETA_SYSTEM, "TrustedBetaTextBlockParam"),
                narrow_parameters(
                    "Messages",
                    _ANTHROPIC_METHODS,
                    "system",
                    {"str": TRUSTED, "BetaTextBlockParam": "TrustedBetaTextBlockParam"},
                ),
            ),
        ),
        Overlay("anthropic.types"),
        Overlay("anthropic.types.message_param"),
        Overlay(
            _SYSTEM,
            (
                TRUSTED_IMPORT,
                inline_trusted_copy(
                    "anthropic.types.text_block_param", "TextBlockParam", "TrustedTextBlockParam"
                ),
                narrow_field(
                    "SystemMessageParam",
                    "content",
                    {"str": TRUSTED, "TextBlockParam": "TrustedTextBlockParam"},
                ),
            ),
        ),
        Overlay("anthropic.types.beta"),
        Overlay("anthropic.types.beta.beta_message_param"),
        Overlay(
            _BETA_SYSTEM,
            (
                TRUSTED_IMPORT,
                inline_trusted_copy(
                    "anthropic.types.beta.beta_text_block_param",
                    "BetaTextBlockParam",
                    "TrustedBetaTextBlockParam",
                ),
                narrow_alias("ContentBlock", {"BetaTextBlockParam": "TrustedBetaTextBlockParam"}),
                narrow_field("BetaSystemMessageParam", "content", {"str": TRUSTED}),
            ),
        ),
    ),
    "openai": (
        Overlay("openai"),
        Overlay("openai._client"),
        Overlay("openai.resources"),
        Overlay("openai.resources.responses"),
        Overlay(
            "openai.resources.responses.responses",
            (
                TRUSTED_IMPORT,
                narrow_parameters(
                    "Responses", _RESPONSES_METHODS, "instructions", {"str": TRUSTED}
                ),
            ),
        ),
        Overlay("openai.resources.beta"),
        Overlay("openai.resources.beta.beta"),
        Overlay("openai.resources.beta.responses"),
        Overlay(
            "openai.resources.beta.responses.responses",
            (
                TRUSTED_IMPORT,
                narrow_parameters(
                    "Responses", frozenset({"create"}), "instructions", {"str": TRUSTED}
                ),
            ),
        ),
        Overlay("openai.resources.chat"),
        Overlay("openai.resources.chat.chat"),
        Overlay("openai.resources.chat.completions"),
        Overlay("openai.resources.chat.completions.completions"),
        Overlay("openai.types"),
        Overlay("openai.types.chat"),
        Overlay("openai.types.chat.chat_completion_message_param"),
        Overlay(
            _CHAT_SYSTEM,
            (
                TRUSTED_IMPORT,
                inline_trusted_copy(
                    "openai.types.chat.chat_completion_content_part_text_param",
                    "ChatCompletionContentPartTextParam",
                    "TrustedContentPartTextParam",
                ),
                narrow_field(
                    "ChatCompletionSystemMessageParam",
                    "content",
                    {
                        "str": TRUSTED,
                        "ChatCompletionContentPartTextParam": "TrustedContentPartTextParam",
                    },
                ),
            ),
        ),
        Overlay(
            "openai.types.chat.chat_completion_developer_message_param",
            (
                TRUSTED_IMPORT,
                import_names(_CHAT_SYSTEM, "TrustedContentPartTextParam"),
                narrow_field(
                    "ChatCompletionDeveloperMessageParam",
                    "content",
                    {
                        "str": TRUSTED,
                        "ChatCompletionContentPartTextParam": "TrustedContentPartTextParam",
                    },
                ),
            ),
        ),
    ),
}


# --- copying a module ----------------------------------------------------------------------------


def _source(module: str) -> tuple[Path, bool]:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{module} is not installed: pip install -e . --group dev")
    path = Path(spec.origin)
    return path, path.name == "__init__.py"


def _parse(module: str) -> ast.Module:
    path, is_package = _source(module)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = package.split(".")
            base = parts[: len(parts) - (node.level - 1)]
            node.module = ".".join([*base, *([node.module] if node.module else [])])
            node.level = 0
    return tree


def _classes(tree: ast.Module) -> Iterator[ast.ClassDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            yield node


def _is_future(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def _insert_imports(tree: ast.Module, imports: list[ast.Import | ast.ImportFrom]) -> None:
    position = 1 if tree.body and _is_future(tree.body[0]) else 0
    tree.body[position:position] = imports


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_overload(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "overload")
        or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in node.decorator_list
    )


def _slim(body: list[ast.stmt]) -> list[ast.stmt]:
    """Drop docstrings and overload implementations; keep only ``__init__`` bodies."""
    kept: list[ast.stmt] = []
    overloaded: set[str] = set()
    for node in body:
        if _is_docstring(node):
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if _is_overload(node):
                overloaded.add(node.name)
            elif node.name in overloaded:
                continue
            if node.name == "__init__":
                node.body = _slim(node.body) or [ast.Expr(ast.Constant(...))]
            else:
                node.body = [ast.Expr(ast.Constant(...))]
        elif isinstance(node, ast.ClassDef):
            node.body = _slim(node.body) or [ast.Expr(ast.Constant(...))]
        elif isinstance(node, ast.If | ast.Try):
            node.body = _slim(node.body) or [ast.Pass()]
            if isinstance(node, ast.If):
                node.orelse = _slim(node.orelse)
        kept.append(node)
    return kept


def render(overlay: Overlay, header: str) -> tuple[Path, str]:
    """The stub file of one overlay: its path in the stub folder and its text."""
    _, is_package = _source(overlay.module)
    tree = _parse(overlay.module)
    tree.body = _slim(tree.body)
    for edit in overlay.edits:
        edit(tree)
    relative = Path(*overlay.module.split("."))
    path = relative / "__init__.pyi" if is_package else relative.with_suffix(".pyi")
    return path, f"{header}\n{ast.unparse(ast.fix_missing_locations(tree))}\n"


def versions() -> dict[str, str]:
    """The installed version of each SDK the stubs are generated from."""
    return {sdk: importlib.metadata.version(sdk) for sdk in OVERLAYS}


def generate() -> dict[Path, str]:
    """Every file of the stub folder, by path relative to it."""
    installed = versions()
    files: dict[Path, str] = {}
    for sdk, overlays in OVERLAYS.items():
        header = (
            f"# Generated by scripts/generate_stubs.py from {sdk} {installed[sdk]}: do not edit.\n"
            "# veridic narrows the parameters and message types that give the model\n"
            "# instructions to TrustedInstruction (docs/providers.md)."
        )
        for overlay in overlays:
            path, text = render(overlay, header)
            files[path] = text
    listed = "".join(f"{sdk}=={version}\n" for sdk, version in sorted(installed.items()))
    files[Path(VERSIONS_FILE)] = (
        "# The SDK versions veridic's SDK stubs were generated from (scripts/generate_stubs.py).\n"
        + listed
    )
    return files


def stale(directory: Path = STUBS) -> list[str]:
    """The stub files that differ from what the installed SDKs generate (empty: up to date)."""
    wanted = generate()
    present = {p.relative_to(directory) for p in directory.rglob("*") if p.is_file()}
    problems = [f"missing: {path}" for path in sorted(set(wanted) - present)]
    problems += [f"not generated: {path}" for path in sorted(present - set(wanted))]
    problems += [
        f"differs: {path}"
        for path in sorted(set(wanted) & present)
        if (directory / path).read_text(encoding="utf-8") != wanted[path]
    ]
    return problems


def write(directory: Path = STUBS) -> None:
    """Replace ``directory`` with freshly generated stubs."""
    files = generate()
    for old in sorted(directory.rglob("*"), reverse=True):
        if old.is_file() and old.relative_to(directory) not in files:
            old.unlink()
        elif old.is_dir() and not any(old.iterdir()):
            old.rmdir()
    for path, text in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale stubs, write nothing")
    parser.add_argument("--out", type=Path, default=STUBS, help="the stubs directory")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale(args.out)
        for problem in problems:
            print(problem)
        if problems:
            print(f"{args.out} is stale: run python scripts/generate_stubs.py", file=sys.stderr)
        return 1 if problems else 0
    write(args.out)
    print(f"wrote {args.out} for " + ", ".join(f"{k} {v}" for k, v in versions().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
