"""An "always" rule saved in a store stays bound to the tool it was granted for.

``store.save_rules(scope, policy.rules)`` and ``ApprovalPolicy.restore(view,
store.rules(scope))`` are the documented round trip of approval rules between
requests. The rules carry their grants; before, the store kept the names and
rules only, so the restored policy granted each "always" rule anew to whatever
tool the new view had under that name: another feature's ``revert``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from _source_docstring import written_in_source

from veridic import (
    ApprovalMode,
    ApprovalPolicy,
    AsyncPostgresAuditSink,
    AuditRecordError,
    PostgresAuditSink,
    Registry,
    SQLiteAuditSink,
    ToolView,
)

Store = SQLiteAuditSink | PostgresAuditSink


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        with SQLiteAuditSink(tmp_path / "audit.db") as sqlite:
            yield sqlite
    else:
        with PostgresAuditSink(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


def _feature(name: str, description: str) -> ToolView:
    """A feature whose ``revert`` tool does what ``description`` says."""
    registry = Registry(name)

    def revert(target: str) -> str:
        """(docstring written by written_in_source)"""
        return f"reverted {target}"

    written_in_source(revert, description)
    registry.tool(kind="write")(revert)
    return registry.view()


_FIXTURES = "Restore the previous revision of a golden fixture; revisions are kept."
_PROMPTS = "Point a feature at an earlier stored prompt revision."


def _granted(view: ToolView) -> ApprovalPolicy:
    policy = ApprovalPolicy(view)
    policy.allow_always("revert")
    return policy


def test_saved_rules_keep_the_grant_of_each_always_rule(store: Store) -> None:
    policy = _granted(_feature("fixtures", _FIXTURES))
    store.save_rules("user:ada", policy.rules)

    elsewhere = ApprovalPolicy.restore(_feature("prompts", _PROMPTS), store.rules("user:ada"))
    request = elsewhere.request("revert", {"target": "triage"})
    assert request.pending
    assert "granted for a different tool" in request.why

    same = ApprovalPolicy.restore(_feature("fixtures", _FIXTURES), store.rules("user:ada"))
    assert same.request("revert", {"target": "golden"}).mode is ApprovalMode.ALWAYS_RULE


def test_saved_rules_read_back_equal_the_rules_saved(store: Store) -> None:
    policy = _granted(_feature("fixtures", _FIXTURES))
    store.save_rules("user:ada", policy.rules)
    assert store.rules("user:ada") == {"revert": "always"}
    assert dict(store.rules("user:ada")) == {"revert": "always"}


def test_rules_saved_as_a_plain_mapping_are_read_as_before(store: Store) -> None:
    # Rows written by earlier releases, and rules a caller writes by hand, have no grants.
    store.save_rules("team", {"revert": "always", "purge": "deny"})
    assert store.rules("team") == {"revert": "always", "purge": "deny"}
    restored = ApprovalPolicy.restore(_feature("fixtures", _FIXTURES), store.rules("team"))
    assert restored.request("revert", {"target": "x"}).mode is ApprovalMode.ALWAYS_RULE


def test_a_grant_edited_in_the_database_never_applies_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        store.save_rules("user:ada", _granted(_feature("fixtures", _FIXTURES)).rules)
    import sqlite3

    with sqlite3.connect(path) as db:
        (document,) = db.execute("SELECT document FROM veridic_approval_rules").fetchone()
        db.execute(
            "UPDATE veridic_approval_rules SET document = ?",
            (document.replace('"grants": {"revert": "', '"grants": {"revert": "x'),),
        )
    with SQLiteAuditSink(path) as store:
        restored = ApprovalPolicy.restore(_feature("fixtures", _FIXTURES), store.rules("user:ada"))
    assert restored.request("revert", {"target": "golden"}).pending


def test_a_stored_rules_row_of_another_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with SQLiteAuditSink(path) as store:
        store.save_rules("user:ada", _granted(_feature("fixtures", _FIXTURES)).rules)
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE veridic_approval_rules SET document = ?",
            ('{"rules": {"revert": "always"}, "grants": {"revert": 1}}',),
        )
    with SQLiteAuditSink(path) as store, pytest.raises(AuditRecordError, match="user:ada"):
        store.rules("user:ada")


def test_the_async_postgres_store_keeps_grants_too(postgres_dsn: str) -> None:
    policy = _granted(_feature("fixtures", _FIXTURES))

    async def saved_and_read() -> ApprovalPolicy:
        async with AsyncPostgresAuditSink(postgres_dsn) as store:
            await store.asave_rules("user:ada", policy.rules)
            return ApprovalPolicy.restore(
                _feature("prompts", _PROMPTS), await store.arules("user:ada")
            )

    restored = asyncio.run(saved_and_read())
    assert restored.request("revert", {"target": "triage"}).pending
