"""The package's layout follows the road data takes, and keeps every old name working.

Three rules, read from the source (every import statement, those under
``TYPE_CHECKING`` and inside functions included):

- each part of the package imports only the parts upstream of it, and the
  module graph has no cycle at all, not even a type-only one;
- ``veridic.errors``, the bottom, imports nothing of veridic;
- the contract's names import from the root, and the flat module paths of 0.1
  are the very modules that moved (``veridic._moved``).
"""

from __future__ import annotations

import ast
import graphlib
import importlib
from pathlib import Path

import pytest

import veridic

PACKAGE = Path(veridic.__file__).resolve().parent

CONTRACT = (
    *("TrustedInstruction", "UntrustedText", "instruction", "untrusted", "join", "is_trusted"),
    *("provenance", "TrustPolicy", "InstructionField", "Composer", "Prompt", "unfence"),
    *("Registry", "ToolView", "Risk", "normalize_plan", "ApprovalPolicy", "ApprovalMode"),
    *("find_doc_gaps", "Templates", "VeridicError", "ProvenanceError", "UnknownToolError"),
    *("ToolUnavailableError", "ToolDeniedError", "RiskFloorError", "AlwaysAllowRefused"),
)
"""The names of the public API contract (docs/design.md), imported from ``veridic``."""

BOTTOM = frozenset(
    {
        "veridic.errors",
        "veridic.config",
        "veridic._sample",
        "veridic._counted",
        "veridic._exception_groups",
        "veridic._ids",
        "veridic._json_object",
        "veridic._moved",
        "veridic._extras",
        "veridic._model_runtime",
        "veridic._urls",
        "veridic._words",
        "veridic._workflow_commands",
    }
)

UPSTREAM: dict[str, frozenset[str]] = {
    "bottom": frozenset(),
    "text": frozenset({"bottom"}),
    "templates": frozenset({"bottom", "text"}),
    "tools": frozenset({"bottom", "text"}),
    "providers": frozenset({"bottom", "text", "tools"}),
    "run": frozenset({"bottom", "text", "tools", "providers"}),
    "integrations": frozenset({"bottom", "text", "templates", "tools", "providers", "run"}),
    "checks": frozenset(
        {"bottom", "text", "templates", "tools", "providers", "run", "integrations"}
    ),
    "testing": frozenset({"bottom", "text"}),
    "mypy": frozenset({"bottom"}),
    "evaluation": frozenset({"bottom", "text", "templates", "tools", "providers", "run", "root"}),
}
"""What each part may import besides itself. The mypy plugin reads only the settings: mypy
loads it into every run, so it must not load the library."""

MOVED = {
    "text": "provenance fields fence wire prompt compose trust_policy",
    "tools": "risk tool tool_specs guards view registry plan",
    "run": "approval effects audit executor gateway",
    "checks": "doc_gaps lint manifest hatches cli",
}
OLD_PATHS = {
    f"veridic.{name}": f"veridic.{part}.{name}"
    for part, names in MOVED.items()
    for name in names.split()
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """The veridic modules ``module`` imports (``from package import submodule`` names the
    submodule; the packages above ``module`` itself are not counted: they load first anyway)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            named = [f"{base}.{alias.name}" for alias in node.names]
            found.update(name for name in named if name in MODULES)
            if not any(name in MODULES for name in named):
                found.add(base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    ancestors = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
    return {name for name in found if name in MODULES and name != module} - ancestors


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _part(module: str) -> str:
    if module in BOTTOM:
        return "bottom"
    if module in OLD_PATHS or module in {"veridic", "veridic.__main__"}:
        return "root"
    return module.split(".")[1]


def test_every_module_belongs_to_a_part() -> None:
    assert {_part(module) for module in MODULES} == {*UPSTREAM, "root"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _part(m) != "root"))
def test_each_part_imports_only_what_is_upstream_of_it(module: str) -> None:
    part = _part(module)
    allowed = {part, *UPSTREAM[part]}
    upward = sorted(name for name in GRAPH[module] if _part(name) not in allowed)
    assert upward == [], f"{module} ({part}) imports from downstream: {upward}"


def test_the_module_graph_has_no_cycle_not_even_a_type_only_one() -> None:
    graphlib.TopologicalSorter(GRAPH).prepare()  # raises CycleError naming the circle


def test_errors_the_bottom_imports_nothing_of_veridic() -> None:
    assert GRAPH["veridic.errors"] == set()


def test_a_downstream_import_is_seen_even_under_type_checking(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from veridic.run.executor import CallResult\n"
        "def f() -> None:\n"
        "    from veridic.tools import view\n"
    )
    assert _imports("veridic.probe", probe) == {"veridic.run.executor", "veridic.tools.view"}


@pytest.mark.parametrize("name", CONTRACT)
def test_every_name_of_the_contract_imports_from_the_root(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from veridic import {name}", namespace)  # the statement users write
    assert namespace[name] is getattr(veridic, name)
    assert name in veridic.__all__


@pytest.mark.parametrize(("old", "new"), sorted(OLD_PATHS.items()))
def test_an_old_module_path_is_the_module_that_moved(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_every_file_left_at_the_root_is_the_bottom_the_root_or_an_old_path() -> None:
    left = {module for module, path in MODULES.items() if path.parent == PACKAGE and "." in module}
    assert left - set(OLD_PATHS) == {*BOTTOM, "veridic.__main__", "veridic.testing"}


def test_the_provenance_function_wins_over_its_old_module_path() -> None:
    importlib.import_module("veridic.provenance")
    assert callable(veridic.provenance)
    assert veridic.provenance(veridic.instruction("x")).kind == "code"
