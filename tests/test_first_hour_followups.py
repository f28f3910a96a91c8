"""What a new user meets in the first hour, said by veridic rather than by Python.

The fifth new user's first hour (CHANGELOG) found three messages worded for the
wrong reader: ``@registry.tool`` written without its arguments failed with Python's
"takes 1 positional argument but 2 were given"; a misspelled, model-written tool
name was told "or register 'purg'"; and ``veridic lint pkg.mod`` (no ``:ATTR``) did
not say which name to give, though the module was there to read.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from veridic import (
    ApprovalPolicy,
    Registry,
    ToolView,
    UnknownToolError,
    VeridicError,
    execute,
)
from veridic.run.audit import SQLiteAuditSink
from veridic.tools.component import Component

FIXTURES = Path(__file__).parent / "cli_fixtures"


def _support_registry() -> Registry:
    registry = Registry()

    @registry.tool(kind="write")
    def purge(ticket: str) -> str:
        """Delete a ticket and its history.

        Args:
            ticket: The ticket's id.
        """
        return ticket

    return registry


def _registry_owner() -> tuple[Registry, Registry | Component]:
    registry = Registry()
    return registry, registry


def _component_owner() -> tuple[Registry, Registry | Component]:
    registry = Registry()
    return registry, registry.component("Pro", boot=lambda: True)


OWNERS = pytest.mark.parametrize(
    "owner", [_registry_owner, _component_owner], ids=["registry", "component"]
)


# --- 1. the decorator without its arguments ----------------------------------------------


@OWNERS
def test_tool_decorator_without_parentheses_says_it_needs_kind(
    owner: Callable[[], tuple[Registry, Registry | Component]],
) -> None:
    registry, holder = owner()

    def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: The order's id.
        """
        return order

    with pytest.raises(VeridicError) as caught:
        holder.tool(refund)  # type: ignore[call-arg, arg-type]  # @registry.tool without parentheses
    message = str(caught.value)
    assert "without its arguments" in message  # what was wrong
    assert "'refund' (tests/test_first_hour_followups.py:" in message  # where
    assert f'@{type(holder).__name__.lower()}.tool(kind="write")' in message  # what to write
    assert "positional argument" not in message
    registry.boot()
    assert "refund" not in registry.view().names()


@OWNERS
def test_tool_decorator_without_kind_says_what_to_write(
    owner: Callable[[], tuple[Registry, Registry | Component]],
) -> None:
    _registry, holder = owner()
    with pytest.raises(VeridicError) as caught:
        holder.tool(risk="high")  # type: ignore[call-arg]  # the decorator without kind=
    message = str(caught.value)
    assert "needs kind=" in message
    assert 'kind="query" for a tool that only reads' in message
    assert 'tool(kind="write")' in message


def test_tool_decorator_given_kind_by_position_says_it_is_a_keyword() -> None:
    registry = Registry()
    with pytest.raises(VeridicError, match=r'by keyword: @registry\.tool\(kind="query"\)'):
        registry.tool("query")  # type: ignore[call-arg]  # kind given by position


@OWNERS
def test_tool_defined_in_a_function_still_resolves_its_local_annotations(
    owner: Callable[[], tuple[Registry, Registry | Component]],
) -> None:
    """The decorator's check is one more frame between the caller and the registry, which
    reads the caller's scope: a model defined in the function annotates the tool beside it."""
    from pydantic import BaseModel

    class Refund(BaseModel):
        order: str

    registry, holder = owner()

    @holder.tool(kind="write")
    def refund(request: Refund) -> str:
        """Refund an order.

        Args:
            request: What to refund.
        """
        return request.order

    view = registry.view()
    assert view.dispatch("refund", {"request": {"order": "A-1"}}) == "A-1"


# --- 2. a model-written name that is no tool ---------------------------------------------


def test_unknown_tool_message_does_not_tell_the_model_to_register_the_name() -> None:
    view = _support_registry().view()
    with pytest.raises(UnknownToolError) as caught:
        view.dispatch("purg", {"ticket": "T-1"})
    message = str(caught.value)
    assert "no tool is named 'purg'" in message
    assert "nearest valid names: purge" in message
    assert "register" not in message.replace("never registered", "")
    assert caught.value.name == "purg"


def test_the_model_is_told_the_nearest_name_not_to_register_its_own() -> None:
    view = _support_registry().view()
    with SQLiteAuditSink(":memory:") as audit:
        result = execute(
            view,
            "purg",
            {"ticket": "T-1"},
            policy=ApprovalPolicy(view),
            audit=audit,
            request_id="req-1",
            prompt_sha256="0" * 64,
        )
    told = str(result.told)
    assert "purge" in told
    assert "register 'purg'" not in told


@given(st.text(min_size=200, max_size=5000))
def test_an_unknown_name_is_quoted_clipped_and_escaped(name: str) -> None:
    message = str(_VIEW.status(name).error())
    assert name not in message
    assert message.isprintable()
    assert len(message) < 1000  # 60 characters at most, each escaped to 10 at most


_VIEW: ToolView = _support_registry().view()


@given(st.text())
@example("purg\n" + "e" * 100)  # escaped, and longer than a message's sample
def test_the_model_is_told_an_unknown_name_in_the_views_one_wording(name: str) -> None:
    # execute() told the model its own rewording of the view's message, clipped at 200
    # characters where the view clips at 60: one name, two messages.
    if name in _VIEW.names():
        return
    with SQLiteAuditSink(":memory:") as audit:
        result = execute(
            _VIEW,
            name,
            {"ticket": "T-1"},
            policy=ApprovalPolicy(_VIEW),
            audit=audit,
            request_id="req-1",
            prompt_sha256="0" * 64,
        )
    assert isinstance(result.error, UnknownToolError)
    assert str(result.error) == str(_VIEW.status(name).error())
    assert result.error.name == name


# --- 3. veridic lint MODULE, without :ATTR ----------------------------------------------


def _lint(target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "veridic", "lint", target],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        check=False,
    )


def test_lint_of_a_module_without_attr_names_the_registries_to_give() -> None:
    done = _lint("clean_app")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "'clean_app' is not MODULE:ATTR" in done.stderr
    assert "clean_app:registry" in done.stderr
    assert "clean_app:support_view" in done.stderr


def test_lint_of_module_dot_attr_says_to_write_a_colon() -> None:
    done = _lint("clean_app.registry")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "'clean_app.registry' is not MODULE:ATTR" in done.stderr
    assert done.stderr.endswith("after a colon: clean_app:registry\n")  # the one it meant


def test_lint_of_a_module_without_registries_says_so(tmp_path: Path) -> None:
    (tmp_path / "plain_app.py").write_text("answer = 42\n")
    done = subprocess.run(
        [sys.executable, "-m", "veridic", "lint", "plain_app"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "module plain_app defines no Registry or ToolView at its top level" in done.stderr


def test_lint_of_a_module_that_is_not_there_keeps_the_general_advice() -> None:
    done = _lint("no_such_app")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "'no_such_app' is not MODULE:ATTR" in done.stderr
    assert "veridic lint myapp.tools:registry" in done.stderr


# --- the same for veridic mcp pin: a module's McpServer objects ---------------------------


_SERVERS = (
    "import sys\n"
    "from veridic import Registry\n"
    "from veridic.integrations.mcp import stdio\n"
    "ISSUES = stdio('issues', sys.executable, '-c', 'pass')\n"
    "TICKETS = stdio('tickets', sys.executable, '-c', 'pass')\n"
    "registry = Registry()\n"
)


def _pin(tmp_path: Path, target: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "servers_app.py").write_text(_SERVERS)
    (tmp_path / "plain_app.py").write_text("answer = 42\n")
    return subprocess.run(
        [sys.executable, "-m", "veridic", "mcp", "pin", target, "-o", "pins.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


def test_mcp_pin_of_a_module_without_attr_names_its_servers(tmp_path: Path) -> None:
    done = _pin(tmp_path, "servers_app")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "'servers_app' is not MODULE:ATTR" in done.stderr
    assert done.stderr.endswith("after a colon: servers_app:ISSUES or servers_app:TICKETS\n")
    assert "servers_app:registry" not in done.stderr  # a Registry is no server
    assert not (tmp_path / "pins.json").exists()


def test_mcp_pin_of_module_dot_attr_says_to_write_a_colon(tmp_path: Path) -> None:
    done = _pin(tmp_path, "servers_app.TICKETS")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.endswith("after a colon: servers_app:TICKETS\n")


def test_mcp_pin_of_a_module_without_servers_says_so(tmp_path: Path) -> None:
    done = _pin(tmp_path, "plain_app")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "module plain_app defines no McpServer at its top level" in done.stderr


def test_mcp_pin_of_a_module_that_is_not_there_keeps_the_general_advice(tmp_path: Path) -> None:
    done = _pin(tmp_path, "no_such_app")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'no_such_app' is not MODULE:ATTR" in done.stderr
    assert "veridic mcp pin myapp.servers:server" in done.stderr
