"""The Postgres audit store's schema, its version, and the migrations between versions.

The tables and columns are those of the SQLite store (:mod:`veridic.run._sqlite_schema`)
at the same :data:`VERSION`, in Postgres types (``BOOLEAN``, ``DOUBLE PRECISION``,
identity keys), so the shared statements of :mod:`veridic.run._store` read
the same rows from either. Postgres has no ``user_version``: the version
lives in ``veridic_schema``, one row.

Versions 1 to 4 never existed on Postgres (the store arrived with 5), so the
first step creates version 5 whole, and each later version adds a step: 6
adds each tool call's record the provider's id of the call (``call_id``;
earlier rows ``""``), as SQLite's 6 does. Opening a store migrates in one transaction, under an
advisory lock: concurrent openers on many hosts wait for the first and then
find nothing to do, and Postgres rolls a failed migration back whole (its
DDL is transactional). A database of a later version is refused,
never written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from veridic.errors import AuditRecordError

if TYPE_CHECKING:
    import psycopg

__all__ = ["VERSION", "check", "prepare"]

VERSION: Final = 6

_LOCK: Final = 0x7665726964696300  # "veridic\0": the advisory lock migrations hold

_APPROVALS: Final = "'not_required', 'always_rule', 'user_confirmed', 'denied', 'not_asked'"
_KEY: Final = "id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"

_VERSION_5: Final = (
    "CREATE TABLE veridic_schema (version INTEGER NOT NULL)",
    f"""CREATE TABLE veridic_audit (
    {_KEY},
    time DOUBLE PRECISION NOT NULL,
    request_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT CHECK (kind IN ('query', 'write')),
    risk TEXT CHECK (risk IN ('low', 'mid', 'high')),
    approval TEXT NOT NULL CHECK (approval IN ({_APPROVALS})),
    wrote_instruction_fields BOOLEAN NOT NULL,
    irreversible BOOLEAN NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    tools_sha256 TEXT NOT NULL,
    outcome TEXT NOT NULL
        CHECK (outcome IN ('ok', 'failed', 'denied', 'blocked', 'refused')),
    detail TEXT NOT NULL,
    operations TEXT NOT NULL,
    duration DOUBLE PRECISION NOT NULL,
    arguments_sha256 TEXT NOT NULL,
    record_id TEXT NOT NULL UNIQUE
)""",
    "CREATE INDEX veridic_audit_request ON veridic_audit (request_id, id)",
    "CREATE INDEX veridic_audit_time ON veridic_audit (time)",
    f"""CREATE TABLE veridic_model_calls (
    {_KEY},
    time DOUBLE PRECISION NOT NULL,
    request_id TEXT NOT NULL,
    api TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    tools_sha256 TEXT NOT NULL,
    tools TEXT NOT NULL,
    instruction_spans TEXT NOT NULL,
    streamed BOOLEAN NOT NULL,
    call_id TEXT NOT NULL UNIQUE
)""",
    "CREATE INDEX veridic_model_calls_request ON veridic_model_calls (request_id, id)",
    f"""CREATE TABLE veridic_model_replies (
    {_KEY},
    time DOUBLE PRECISION NOT NULL,
    request_id TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    response_id TEXT NOT NULL,
    model TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    tool_calls TEXT NOT NULL,
    input_tokens BIGINT,
    output_tokens BIGINT,
    latency DOUBLE PRECISION NOT NULL,
    call_id TEXT UNIQUE
)""",
    "CREATE INDEX veridic_model_replies_request ON veridic_model_replies (request_id, id)",
    f"""CREATE TABLE veridic_conversations (
    {_KEY},
    time DOUBLE PRECISION NOT NULL,
    key TEXT NOT NULL,
    turns INTEGER NOT NULL,
    document TEXT NOT NULL
)""",
    "CREATE INDEX veridic_conversations_key ON veridic_conversations (key, id)",
    f"""CREATE TABLE veridic_approval_rules (
    {_KEY},
    time DOUBLE PRECISION NOT NULL,
    scope TEXT NOT NULL,
    document TEXT NOT NULL
)""",
    "CREATE INDEX veridic_approval_rules_scope ON veridic_approval_rules (scope, id)",
    f"""CREATE TABLE veridic_paused_runs (
    {_KEY},
    time DOUBLE PRECISION NOT NULL,
    request_id TEXT NOT NULL,
    document TEXT NOT NULL,
    claimed DOUBLE PRECISION
)""",
    "CREATE INDEX veridic_paused_runs_request ON veridic_paused_runs (request_id, id)",
    f"""CREATE TABLE veridic_vouches (
    {_KEY},
    time DOUBLE PRECISION NOT NULL,
    policy TEXT NOT NULL,
    reason TEXT NOT NULL,
    caller TEXT NOT NULL,
    sample TEXT NOT NULL,
    record_id TEXT NOT NULL UNIQUE
)""",
    "CREATE INDEX veridic_vouches_policy ON veridic_vouches (policy, id)",
    "INSERT INTO veridic_schema (version) VALUES (5)",
)


def _create(db: psycopg.Connection[Any]) -> None:
    """An empty database: the whole schema of version 5."""
    for statement in _VERSION_5:
        db.execute(statement)


def _to_6(db: psycopg.Connection[Any]) -> None:
    """The tool-call id of each call's record (earlier rows: ``""``, none recorded)."""
    db.execute("ALTER TABLE veridic_audit ADD COLUMN call_id TEXT NOT NULL DEFAULT ''")


_STEPS: Final[dict[int, tuple[Callable[[psycopg.Connection[Any]], None], int]]] = {
    0: (_create, 5),
    5: (_to_6, 6),
}
"""``_STEPS[v]`` is the step that takes a database of version ``v`` on, and the version it
reaches (version 0: no veridic tables)."""


def prepare(db: psycopg.Connection[Any], where: str) -> None:
    """Bring the database behind ``db`` (autocommit) to :data:`VERSION`, or refuse it.

    Raises:
        AuditRecordError: the database was written by a later veridic, or holds
            a ``veridic_schema`` table veridic did not write.
        psycopg.Error: it cannot be read or written.
    """
    if _version(db, where) == VERSION:  # the common case: no lock taken
        return
    # A session lock, taken before the transaction: a backend that waited for it inside
    # the transaction would still see the catalog as it was before the winner's commit
    # (catalog caches are refreshed when a transaction starts), and create the tables again.
    db.execute("SELECT pg_advisory_lock(%s)", (_LOCK,))
    try:
        with db.transaction():
            version = _version(db, where)
            if version > VERSION:
                raise AuditRecordError(
                    f"{where} holds audit schema version {version}, written by a later "
                    f"veridic; this one knows versions up to {VERSION}: upgrade veridic to "
                    "read it (it is never written by an older version)"
                )
            while version < VERSION:
                step, version = _STEPS[version]
                step(db)
            db.execute("UPDATE veridic_schema SET version = %s", (VERSION,))
    finally:
        db.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))


def check(db: psycopg.Connection[Any], where: str) -> None:
    """Refuse a database that is not at :data:`VERSION`, without writing it (a review).

    Raises:
        AuditRecordError: it holds no veridic schema, or another version.
    """
    version = _version(db, where)
    if version == 0:
        raise AuditRecordError(
            f"{where} holds no veridic audit tables: pass the database a PostgresAuditSink "
            "writes to (its search_path, if the tables live in another schema)"
        )
    if version > VERSION:
        raise AuditRecordError(
            f"{where} holds audit schema version {version}, written by a later veridic; "
            f"this one knows versions up to {VERSION}: upgrade veridic to read it"
        )
    if version != VERSION:
        raise AuditRecordError(
            f"{where} holds audit schema version {version}, and this veridic reads version "
            f"{VERSION} without writing: open it once with a writable PostgresAuditSink to "
            "migrate it, or review it with the veridic that wrote it"
        )


def _version(db: psycopg.Connection[Any], where: str) -> int:
    found = db.execute("SELECT to_regclass('veridic_schema') IS NOT NULL").fetchone()
    if found is None or not found[0]:
        return 0
    rows = db.execute("SELECT version FROM veridic_schema").fetchall()
    if len(rows) != 1 or not isinstance(rows[0][0], int):
        raise AuditRecordError(
            f"{where}: the veridic_schema table holds {rows!r:.80}, not one version number; "
            "something other than veridic wrote it: check what else uses this database"
        )
    return rows[0][0]
