"""The Postgres audit store's schema, its version, and the migrations between versions.

The tables and columns are those of the SQLite store (:mod:`veridic.run._sqlite_schema`)
at the same :data:`VERSION`, in Postgres types (``BOOLEAN``, ``DOUBLE PRECISION``,
identity keys), so the shared statements of :mod:`veridic.run._store` read
the same rows from either. Postgres has no ``user_version``: the version
lives in ``veridic_schema``, one row.

Versions 1 to 4 never existed on Postgres (the store arrived with 5), so the first step
creates version 5 whole, and each later version adds a step: 6 adds each tool call's record
the provider's id of the call (``call_id``; earlier rows ``""``), as SQLite's 6 does; 7
adds an index on ``time`` to every table a review reads by time range (the records had one
since 5; the model calls, answers and vouches had none), as SQLite's 7 does, and indexes
the keys rows are looked up by (request ids, a chat's key, a scope, a policy) by their
hash, so a key of any length is kept (a B-tree entry holds 2704 bytes at most); 8 adds the
parts of each answer's usage beside its totals (cache reads, cache writes, reasoning; NULL
where unknown, as for every answer recorded before), as SQLite's 8 does; 9 adds each model
call's digest of the request's options (``options_sha256``; earlier calls ``""``, not
recorded), as SQLite's 9 does; 10 adds each paused run the digest of the token of the claim
that took it (``claim_sha256``; runs claimed before have none) and keys each answer that
names no call by the digest of its columns (``unlinked_sha256``, unique: two hosts writing
one such answer at once keep it once; the answers kept before are keyed by the migration, a
repeat of an earlier one excepted, and no row is dropped), as SQLite's 10 does. Building an
index holds up that table's writers while it runs (a plain build, since ``CONCURRENTLY``
cannot run inside the migration's transaction): on tables of millions of rows, migrate
while the hosts are quiet. Opening a store migrates in one transaction, under an advisory
lock: concurrent openers on many hosts wait for the first and then find nothing to do, and
Postgres rolls a failed migration back whole (its DDL is transactional); its locks are
waited for :data:`LOCK_TIMEOUT` at most. A database of a later version is refused, never
written, with the release that wrote it (each migration leaves ``veridic X (schema N)`` as
the comment of ``veridic_schema``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from veridic import __version__
from veridic._sample import clip, quoted
from veridic.errors import AuditRecordError
from veridic.run._store import unlinked_keys

if TYPE_CHECKING:
    import psycopg

__all__ = ["LOCK_TIMEOUT", "VERSION", "check", "columns", "lacks", "prepare"]

VERSION: Final = 10

_LOCK: Final = 0x7665726964696300  # "veridic\0": the advisory lock migrations hold

LOCK_TIMEOUT: Final = "3s"
"""How long a migration waits for a table's lock before it gives up (Postgres units)."""

_LOCK_NOT_AVAILABLE: Final = "55P03"  # the SQLSTATE of a lock_timeout that expired
_RELEASE: Final = f"veridic {__version__} (schema {VERSION})"
"""What a migration writes as the comment of ``veridic_schema``: which veridic wrote the
database, for the refusal of an older one (a rolling upgrade's hosts not upgraded yet)."""

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


_TIMED: Final = ("veridic_audit", "veridic_model_calls", "veridic_model_replies", "veridic_vouches")
"""The tables a review reads by time range: each has an index on ``time`` from 7 on."""


_KEYS: Final = (
    ("veridic_audit_request", "veridic_audit", "request_id"),
    ("veridic_model_calls_request", "veridic_model_calls", "request_id"),
    ("veridic_model_replies_request", "veridic_model_replies", "request_id"),
    ("veridic_conversations_key", "veridic_conversations", "key"),
    ("veridic_approval_rules_scope", "veridic_approval_rules", "scope"),
    ("veridic_paused_runs_request", "veridic_paused_runs", "request_id"),
    ("veridic_vouches_policy", "veridic_vouches", "policy"),
)
"""The indexes of the text a caller looks rows up by (a request id, a chat's key, a user)."""


def _to_7(db: psycopg.Connection[Any]) -> None:
    """An index on ``time`` for each table read by time range (the records' exists since 5);
    the lookup keys indexed by their hash.

    A B-tree index entry holds the key itself, and Postgres refuses one over 2704
    bytes: a request id of 3000 characters (an HTTP client's request id header, taken
    as the request's) made every write of its records fail on Postgres, after the call
    had run, while SQLite stored them. A hash index holds a key's hash, whatever its
    length, and answers the lookups the stores make (``=``; the rows are then sorted).
    """
    for table in _TIMED:
        db.execute(f"CREATE INDEX IF NOT EXISTS {table}_time ON {table} (time)")
    for index, table, column in _KEYS:
        db.execute(f"DROP INDEX IF EXISTS {index}")
        db.execute(f"CREATE INDEX {index} ON {table} USING hash ({column})")


_USAGE_PARTS: Final = (
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)
"""The columns of an answer's usage parts, from 8 on (those of SQLite's 8)."""


def _to_8(db: psycopg.Connection[Any]) -> None:
    """The parts of each answer's usage; earlier answers' NULL, unknown (not 0)."""
    for column in _USAGE_PARTS:
        db.execute(f"ALTER TABLE veridic_model_replies ADD COLUMN {column} BIGINT")


def _to_9(db: psycopg.Connection[Any]) -> None:
    """The digest of each model call's options; earlier calls' ``""``, not recorded."""
    db.execute("ALTER TABLE veridic_model_calls ADD COLUMN options_sha256 TEXT NOT NULL DEFAULT ''")


_ANSWER_10: Final = (
    "time, request_id, prompt_sha256, response_id, model, stop_reason, tool_calls, "
    "input_tokens, output_tokens, latency, call_id, cache_read_input_tokens, "
    "cache_creation_input_tokens, reasoning_output_tokens"
)
"""The columns of an answer's row at version 10 but its key and id (SQLite's ``_ANSWER_10``)."""


def _to_10(db: psycopg.Connection[Any]) -> None:
    """Claim tokens of paused runs; the key of each answer that names no call.

    The answers are read in binary: as text, a ``DOUBLE PRECISION`` may be printed
    rounded (``extra_float_digits``, see ``PostgresAuditSink._check_kept``), and an answer
    keyed from a rounded time would not be found by its own insert.
    """
    db.execute("ALTER TABLE veridic_paused_runs ADD COLUMN claim_sha256 TEXT")
    db.execute("ALTER TABLE veridic_model_replies ADD COLUMN unlinked_sha256 TEXT")
    with db.cursor(binary=True) as read:
        unlinked = read.execute(
            f"SELECT id, {_ANSWER_10} FROM veridic_model_replies WHERE call_id IS NULL ORDER BY id"
        ).fetchall()
    with db.cursor() as update:
        update.executemany(
            "UPDATE veridic_model_replies SET unlinked_sha256 = %s WHERE id = %s",
            unlinked_keys(unlinked),
        )
    db.execute(
        "CREATE UNIQUE INDEX veridic_model_replies_unlinked "
        "ON veridic_model_replies (unlinked_sha256)"
    )


_UNKNOWN_PARTS: Final = tuple((column, "NULL::BIGINT") for column in _USAGE_PARTS)
"""An answer's usage parts, read from a database before 8: unknown, as a migration leaves them
(each is named once, in the columns ``veridic.run._store`` reads an answer's record from)."""

_UNRECORDED_OPTIONS: Final = (("options_sha256", "''"),)
"""A model call's options digest, read from a database before 9: not recorded, as a migration
leaves it."""

_READ_AS: Final[dict[int, tuple[tuple[str, str], ...]]] = {
    5: (("call_id FROM veridic_audit", "''"), *_UNKNOWN_PARTS, *_UNRECORDED_OPTIONS),
    6: (*_UNKNOWN_PARTS, *_UNRECORDED_OPTIONS),
    7: (*_UNKNOWN_PARTS, *_UNRECORDED_OPTIONS),
    8: _UNRECORDED_OPTIONS,
    9: (),
    10: (),
}
"""For each version a review reads without migrating, the columns it lacks, read as the value
a migration gives them. A column is named with the table it is read from (``call_id FROM
veridic_audit``, the last column of :data:`~veridic.run._store.COLUMNS`): the other tables'
``call_id`` exist in both versions."""

_STEPS: Final[dict[int, tuple[Callable[[psycopg.Connection[Any]], None], int]]] = {
    0: (_create, 5),
    5: (_to_6, 6),
    6: (_to_7, 7),
    7: (_to_8, 8),
    8: (_to_9, 9),
    9: (_to_10, 10),
}

_LACKS: Final[dict[int, str]] = {
    5: 'its tool-call records have no call id (call_id "")',
    6: (
        "its model calls, answers and vouches have no index on time (a time range reads "
        "them all), and it cannot hold a request id of more than about 2700 bytes"
    ),
    7: (
        "its answers' usage is not broken down (their cache reads, cache writes and "
        "reasoning are unknown)"
    ),
    8: (
        'its model calls have no digest of the request\'s options (options_sha256 ""), so '
        "which structured-output schema the model was given is not on record"
    ),
    9: (
        "its paused runs claimed before have no claim token, and its answers that name no "
        "call have no key (neither of which a review reads)"
    ),
}
"""For each older version a review reads as it is, what it lacks, in words for a report."""


def lacks(version: int) -> str:
    """What a database of ``version``, read as it is (:func:`check`), lacks; ``""`` for none."""
    return "; ".join(_LACKS[v] for v in sorted(_LACKS) if v >= version)


"""``_STEPS[v]`` is the step that takes a database of version ``v`` on, and the version it
reaches (version 0: no veridic tables)."""


def prepare(db: psycopg.Connection[Any], where: str) -> None:
    """Bring the database behind ``db`` (autocommit) to :data:`VERSION`, or refuse it.

    A step that changes a table (``ALTER TABLE``) waits for every session that
    uses the table, and every writer that comes after waits behind it: a
    report's long query would stop every host's writes. So a migration waits
    :data:`LOCK_TIMEOUT` for its locks at most (or the session's own
    ``lock_timeout``, when its conninfo sets one), then gives up, changing
    nothing.

    Raises:
        AuditRecordError: the database was written by a later veridic, holds
            a ``veridic_schema`` table veridic did not write, or a migration
            could not take its locks in time.
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
                raise AuditRecordError(_later(db, where, version))
            bound = db.execute(
                "SELECT set_config('lock_timeout', CASE current_setting('lock_timeout') "
                "WHEN '0' THEN %s ELSE current_setting('lock_timeout') END, true)",
                (LOCK_TIMEOUT,),
            ).fetchone()
            waited = LOCK_TIMEOUT if bound is None else str(bound[0])
            found = version
            try:
                while version < VERSION:
                    step, version = _STEPS[version]
                    step(db)
            except Exception as error:
                if getattr(error, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
                    raise
                raise AuditRecordError(_busy(where, found, waited)) from error
            db.execute("UPDATE veridic_schema SET version = %s", (VERSION,))
            db.execute(f"COMMENT ON TABLE veridic_schema IS '{_RELEASE}'")
    finally:
        db.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))


def check(db: psycopg.Connection[Any], where: str) -> int:
    """The version of a database a review reads as it is, without writing it.

    A database of version 5 to 9 is read too (version 5's tool-call records
    have no ``call_id``: read as ``""``, as a migration would fill it in; the
    answers before 8 have no usage parts: read as NULL, unknown; the model calls
    before 9 have no ``options_sha256``: read as ``""``, not recorded; what 10
    added, claim tokens and the keys of unlinked answers, no review reads); the caller
    reads it with :func:`columns`, and :func:`lacks` says what it misses.

    Raises:
        AuditRecordError: it holds no veridic schema, or a version this one cannot read.
    """
    version = _version(db, where)
    if version == 0:
        raise AuditRecordError(
            f"{where} holds no veridic audit tables: pass the database a PostgresAuditSink "
            "writes to (its search_path, if the tables live in another schema)"
        )
    if version > VERSION:
        raise AuditRecordError(_later(db, where, version))
    if version not in _READ_AS:
        raise AuditRecordError(
            f"{where} holds audit schema version {version}, and this veridic reads versions "
            f"{min(_READ_AS)} to {VERSION} without writing: open it once with a writable "
            "PostgresAuditSink to migrate it, or review it with the veridic that wrote it"
        )
    return version


def columns(sql: str, version: int) -> str:
    """``sql`` (a shared statement) as it reads a database of ``version`` (see :func:`check`)."""
    for column, value in _READ_AS[version]:
        sql = sql.replace(f", {column}", f", {value} AS {column}")
    return sql


_FIRST: Final = min(version for _, version in _STEPS.values())
"""The first version a Postgres store had (5): none before it was ever written here."""

_TABLES: Final = (
    "veridic_audit",
    "veridic_model_calls",
    "veridic_model_replies",
    "veridic_conversations",
    "veridic_approval_rules",
    "veridic_paused_runs",
    "veridic_vouches",
)
"""The tables of the schema besides ``veridic_schema``, which the first step creates with them."""


def _version(db: psycopg.Connection[Any], where: str) -> int:
    """The schema version ``veridic_schema`` holds; 0 for a database without veridic's tables.

    Raises:
        AuditRecordError: ``veridic_schema`` holds anything but one version a veridic
            writes on Postgres (5 on), or is missing beside tables of veridic's names. A
            version of 3 ended the migration in a bare ``KeyError``; a version of 0, or a
            ``veridic_audit`` of another application's, in Postgres's "relation already
            exists"; and a read-only open told the caller to migrate such a database.
    """
    if not _has_schema(db):
        tables = _found_tables(db)
        if not tables:
            return 0
        # A store opened at once on this new database may have committed them all, and
        # veridic_schema with them, since the first look: their first step commits all at
        # once, so a second look that still misses veridic_schema proves it missing.
        if not _has_schema(db):
            raise AuditRecordError(_without_schema(where, tables))
    rows = db.execute("SELECT version FROM veridic_schema").fetchall()
    # type(), not isinstance(): a BOOLEAN column reads as True, which is an int.
    if len(rows) != 1 or type(rows[0][0]) is not int:
        raise AuditRecordError(
            f"{where}: the veridic_schema table holds {quoted(rows, 80)}, not one version number; "
            "something other than veridic wrote it: check what else uses this database"
        )
    version: int = rows[0][0]
    if version < _FIRST:
        raise AuditRecordError(
            f"{where}: the veridic_schema table holds version {version}, which no veridic "
            f"writes on Postgres (its first is {_FIRST}): something other than veridic wrote "
            "it, and nothing was changed; check what else uses this database, and give the "
            "audit store a database (or a schema: options=-csearch_path=audit) of its own"
        )
    return version


def _has_schema(db: psycopg.Connection[Any]) -> bool:
    """Whether the database (its ``search_path``) holds ``veridic_schema``."""
    found = db.execute("SELECT to_regclass('veridic_schema') IS NOT NULL").fetchone()
    return found is not None and bool(found[0])


def _found_tables(db: psycopg.Connection[Any]) -> list[str]:
    """Which of :data:`_TABLES` the database (its ``search_path``) holds, in their order."""
    rows = db.execute(
        "SELECT name FROM unnest(%s::text[]) WITH ORDINALITY AS t (name, at) "
        "WHERE to_regclass(name) IS NOT NULL ORDER BY at",
        (list(_TABLES),),
    ).fetchall()
    return [str(name) for (name,) in rows]


def _without_schema(where: str, tables: list[str]) -> str:
    """The refusal of ``tables`` of veridic's names found without ``veridic_schema``.

    The first step creates them all with ``veridic_schema`` in one transaction, so
    such tables are another application's, or veridic's with ``veridic_schema``
    dropped: neither is migrated, nor read as veridic's of some version.
    """
    return (
        f"{where} holds {', '.join(tables)} without veridic_schema, which every veridic "
        "writes beside them with the version of their columns: they are another "
        "application's tables of these names, or veridic's with veridic_schema dropped; "
        "nothing was changed: give the audit store a database (or a schema: "
        "options=-csearch_path=audit) of its own, or restore veridic_schema from the "
        "backup the tables came from"
    )


def _later(db: psycopg.Connection[Any], where: str, version: int) -> str:
    """Why a database of a later ``version`` is refused, naming the veridic that wrote it."""
    row = db.execute("SELECT obj_description('veridic_schema'::regclass, 'pg_class')").fetchone()
    comment = row[0] if row is not None else None
    # Believed only when it names the version found: written by the migration that made it.
    release = (
        clip(comment.removesuffix(f" (schema {version})"))
        if isinstance(comment, str) and comment.endswith(f" (schema {version})")
        else "it did not record which"
    )
    return (
        f"{where} holds audit schema version {version}, written by a later veridic "
        f"({release}); this host runs veridic {__version__}, which knows versions up to "
        f"{VERSION} and never writes a later one: upgrade veridic on this host to the "
        "release the other hosts run (during a rolling upgrade, a host of the old release "
        "that is running keeps writing; one that starts anew needs the new release)"
    )


def _busy(where: str, version: int, waited: str) -> str:
    """Why a migration gave up after ``waited`` for its locks, and what to do instead."""
    return (
        f"{where}: migrating the audit schema from version {version} to {VERSION} waited "
        f"{waited} for a lock on its tables, held by another session (a long query, a dump, "
        "a transaction left open: see pg_stat_activity), and gave up rather than hold up "
        "every writer behind it; nothing was changed. Open the store again once that session "
        "is done, or migrate while nothing else uses the tables, waiting longer: "
        "python -c \"import veridic; veridic.PostgresAuditSink('<conninfo> "
        "options=-clock_timeout=60s').close()\""
    )
