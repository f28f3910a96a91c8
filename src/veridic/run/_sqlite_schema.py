"""The SQLite audit store's schema, its version, and the migrations between versions.

The version lives in ``PRAGMA user_version``, so a database says which schema
it holds without a table of its own. Versions:

1. veridic 0.1: ``veridic_audit`` and ``veridic_model_calls``. Its databases
   have ``user_version`` 0 (0.1 did not set it); they are recognised by their
   tables.
2. A refused call is recorded with approval ``not_asked``, not ``denied``
   (issue 17: a model's typo is not a user's denial), so the ``approval``
   check allows the new value and 0.1's refused rows are rewritten; the
   ``veridic_model_replies`` and ``veridic_conversations`` tables are added.
3. Every record has its own id, made by the writer (``record_id``; a model
   call's ``call_id``, which its answer's record carries), unique, so a
   record written twice (a retry) is stored once; rows of earlier versions
   get random ids, and answers recorded before their calls had ids keep no
   link (NULL).
4. Approval state that outlives a process: saved approval rules
   (``veridic_approval_rules``, each save kept, the latest read) and paused
   runs (``veridic_paused_runs``, claimed once when resumed).
5. What a reviewer needs beside the approval: each call's ``duration`` and
   the digest of its arguments (``arguments_sha256``; earlier rows get 0 and
   ``""``, "not recorded"); trust-policy vouches (``veridic_vouches``); and an
   answer is stored once per call (``call_id`` unique among the answers, so a
   retried write is not counted twice; earlier exact repeats of one call's
   answer are dropped, keeping the first, and an earlier answer that differs
   from its call's first is kept without the link, NULL).
6. Each tool call's record keeps the provider's id of the call (``call_id``),
   so a resume sees which of a paused run's waiting calls already ran; earlier
   rows get ``""``, "no id recorded".
7. Reads of a time range (``veridic audit --since``) find their rows through an
   index on ``time`` of the records, model calls, answers and vouches, instead
   of reading every row; and the file says which release wrote it
   (``veridic_release``, one row ``veridic X (schema N)``, written by every
   migration from 7 on), so an older veridic's refusal names that release, as
   the Postgres store's does. Nothing a writer of 6 does changes meaning: its
   processes still running keep writing to the migrated file. Building the
   indexes holds every writer up while it runs (SQLite waits 5 seconds for a
   lock, then fails the write): migrate a file of millions of rows while its
   writers are quiet.
8. An answer's record keeps the parts of its usage beside the totals
   (``cache_read_input_tokens``, ``cache_creation_input_tokens``,
   ``reasoning_output_tokens``: the cache reads and writes among the tokens
   read, the reasoning among those written), NULL where they are unknown: an
   answer without usage, one whose provider did not break its tokens down
   (every part 0), and every answer recorded before (not 0: nobody said there
   was no cache read). A writer of 7 still running keeps writing to the
   migrated file, its answers' parts NULL.
9. A model call's record keeps the digest of the request's options
   (``options_sha256``: the SHA-256 of the canonical JSON of what the model
   read beyond the prompt and the tools, a structured-output schema among
   them), so a review can tell which schema the model was given; the calls
   recorded before get ``""``, "not recorded". A writer of 8 still running
   keeps writing to the migrated file, its calls' digest ``""``.
10. A claim of a paused run leaves the SHA-256 of its token in the rows it takes
    (``veridic_paused_runs.claim_sha256``; never the token, which would claim the run
    again for whoever read it), so a claim sent again with its token
    (its answer lost) gets the same run back, and no other claim does; runs claimed
    before have none (NULL), and stay claimed. An answer that names no call is keyed
    by the digest of its columns (``veridic_model_replies.unlinked_sha256``, unique),
    so one written twice is kept once, atomically; the unlinked answers kept before
    are keyed by the migration, a repeat of an earlier one (NULL) excepted, and no row
    is dropped. A writer of 9 still running keeps writing to the migrated file: its
    claims leave no token, and its unlinked answers no key (checked as before, and
    not found by a new writer's key).

Opening a store brings the database to :data:`VERSION` in one immediate
transaction: concurrent openers (threads, processes) wait for the first one
and then find nothing left to do, and a migration that fails leaves the
database as it was. A database of a later version than this veridic knows is
refused, never written (not even locked): its rows may mean what this code
cannot read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Final

from veridic import __version__
from veridic._sample import clip
from veridic.errors import AuditRecordError
from veridic.run._store import unlinked_keys

__all__ = ["VERSION", "busy", "lacks", "prepare"]

VERSION: Final = 10

_RELEASE: Final = f"veridic {__version__} (schema {VERSION})"
"""What a migration writes in ``veridic_release``: which veridic wrote the file, for the
refusal of an older one."""

_AUDIT_TABLE: Final = """
CREATE TABLE {name} (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    request_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT CHECK (kind IN ('query', 'write')),
    risk TEXT CHECK (risk IN ('low', 'mid', 'high')),
    approval TEXT NOT NULL CHECK (approval IN ({approvals})),
    wrote_instruction_fields INTEGER NOT NULL CHECK (wrote_instruction_fields IN (0, 1)),
    irreversible INTEGER NOT NULL CHECK (irreversible IN (0, 1)),
    prompt_sha256 TEXT NOT NULL,
    tools_sha256 TEXT NOT NULL,
    outcome TEXT NOT NULL
        CHECK (outcome IN ('ok', 'failed', 'denied', 'blocked', 'refused')),
    detail TEXT NOT NULL,
    operations TEXT NOT NULL
)"""

_APPROVALS_1: Final = "'not_required', 'always_rule', 'user_confirmed', 'denied'"
_APPROVALS_2: Final = f"{_APPROVALS_1}, 'not_asked'"

_MODEL_CALLS: Final = """
CREATE TABLE IF NOT EXISTS veridic_model_calls (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    request_id TEXT NOT NULL,
    api TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    tools_sha256 TEXT NOT NULL,
    tools TEXT NOT NULL,
    instruction_spans TEXT NOT NULL,
    streamed INTEGER NOT NULL CHECK (streamed IN (0, 1))
)"""

_ADDED_IN_2: Final = (
    """CREATE TABLE IF NOT EXISTS veridic_model_replies (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    request_id TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    response_id TEXT NOT NULL,
    model TEXT NOT NULL,
    stop_reason TEXT NOT NULL,
    tool_calls TEXT NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    latency REAL NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS veridic_model_replies_request "
    "ON veridic_model_replies (request_id, id)",
    """CREATE TABLE IF NOT EXISTS veridic_conversations (
    id INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    key TEXT NOT NULL,
    turns INTEGER NOT NULL,
    document TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS veridic_conversations_key ON veridic_conversations (key, id)",
)

_AUDIT_INDEX: Final = (
    "CREATE INDEX IF NOT EXISTS veridic_audit_request ON veridic_audit (request_id, id)"
)
_CALLS_INDEX: Final = (
    "CREATE INDEX IF NOT EXISTS veridic_model_calls_request ON veridic_model_calls (request_id, id)"
)


def busy(error: sqlite3.Error) -> bool:
    """Whether SQLite refused for a lock another connection holds, which waiting can end.

    Every extended code of ``SQLITE_BUSY`` is: ``_RECOVERY`` (another connection is
    recovering the WAL file), ``_SNAPSHOT`` (a read in WAL mode went stale: retried as a
    new statement in autocommit, it reads afresh) and ``_TIMEOUT`` (a VFS's blocking lock
    timed out). ``SQLITE_LOCKED`` is not: it is a conflict inside the same connection, or
    of a shared cache, which no store's connection uses, and waiting does not end it.
    """
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_BUSY


def prepare(db: sqlite3.Connection, where: str) -> None:
    """Bring the database behind ``db`` (autocommit) to :data:`VERSION`, or refuse it.

    Raises:
        AuditRecordError: the database was written by a later veridic, or is
            another application's.
        sqlite3.Error: it cannot be read or written; one for a lock that another
            connection kept longer than SQLite waits (:func:`busy`) has a note that names
            the store and says what to do.
    """
    try:
        _prepare(db, where)
    except sqlite3.Error as error:
        if busy(error):
            error.add_note(
                f"{where} could not bring the file to audit schema {VERSION}: another "
                "connection kept it locked (a write, or a read of a file not yet in WAL mode, "
                "such as a new one) for as long as SQLite waits; nothing was changed: open the "
                "store again once that connection is done"
            )
        raise


def _prepare(db: sqlite3.Connection, where: str) -> None:
    """:func:`prepare`, whose errors it notes."""
    version = _version(db, where)
    if version == VERSION:  # the common case: no write lock taken
        return
    if version > VERSION:  # refused before any lock: a read-only file is refused alike
        raise AuditRecordError(_later(db, where, version))
    db.execute("BEGIN IMMEDIATE")
    try:
        version = _version(db, where)
        if version > VERSION:
            raise AuditRecordError(_later(db, where, version))
        if version == VERSION:  # another opener migrated it meanwhile: its release stays
            db.execute("COMMIT")
            return
        shape = _shape(db)
        if version < shape:
            (raw,) = db.execute("PRAGMA user_version").fetchone()
            raise AuditRecordError(
                f"{where} holds veridic's tables of schema {shape}, but user_version {raw} "
                f"(schema {version}): another program sharing the file set "
                "user_version (its own migrations keep their version there), and migrating "
                "again would break veridic's tables; nothing was changed: give the audit "
                "store a file of its own, and set user_version back to "
                f"{shape} for this one"
            )
        for step in _STEPS[version:]:
            step(db)
        db.execute("DELETE FROM veridic_release")
        db.execute("INSERT INTO veridic_release (release) VALUES (?)", (_RELEASE,))
        db.execute(f"PRAGMA user_version = {VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _later(db: sqlite3.Connection, where: str, version: int) -> str:
    """Why a database of a later ``version`` is refused, naming the veridic that wrote it.

    What ``veridic_release`` holds is believed only when it names the version
    found (the migration that made that version wrote it); a file of a release
    that did not record it (none before schema 7 did) is said to be of an
    unrecorded one.
    """
    row = None
    if _has_table(db, "veridic_release"):
        try:
            row = db.execute("SELECT release FROM veridic_release LIMIT 2").fetchall()
        except sqlite3.Error:  # a later release may have changed the table: still refused
            row = None
    recorded = row[0][0] if row is not None and len(row) == 1 else None
    suffix = f" (schema {version})"
    release = (
        clip(recorded.removesuffix(suffix))
        if isinstance(recorded, str) and recorded.endswith(suffix)
        else "it did not record which"
    )
    return (
        f"{where} holds audit schema version {version}, written by a later veridic "
        f"({release}); this process runs veridic {__version__}, which knows versions up to "
        f"{VERSION} and never writes a later one: upgrade veridic here to the release the "
        "other processes writing this file run"
    )


def _version(db: sqlite3.Connection, where: str) -> int:
    """The schema version of a veridic database, or 0 for one without veridic's tables.

    ``user_version`` is the application's own: another program may keep its
    schema's version there, so a database is read as veridic's only when it
    holds ``veridic_audit``. One without it is a new store when its
    ``user_version`` is 0, whatever other tables it holds: an application may
    keep the audit in its own database (an ORM keeps its migrations in a table,
    not in ``user_version``), and the same file works when veridic's tables
    came first.

    Raises:
        AuditRecordError: the database holds another application's tables and a
            ``user_version`` it set.
    """
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if _has_table(db, "veridic_audit"):
        return max(int(version), 1)  # veridic 0.1 did not set user_version
    if version != 0:
        others = [
            name
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' "
                "ORDER BY name LIMIT 3"
            )
        ]
        raise AuditRecordError(
            f"{where} is an SQLite database of another application (user_version {version}, "
            f"tables {', '.join(map(clip, others)) or 'none'}), without veridic's "
            "veridic_audit table: the store keeps its schema version in user_version, which "
            "that application's own migrations read; nothing was changed: give the audit "
            "store a file of its own"
        )
    return 0


def _shape(db: sqlite3.Connection) -> int:
    """The least schema version veridic's tables in ``db`` show (0 without them).

    What each migration added is looked for, so a ``user_version`` that another
    program changed is found before a migration runs again on tables that have
    its changes (SQLite's "duplicate column name", or worse).
    """
    if not _has_table(db, "veridic_audit"):
        return 0
    if _has_table(db, "veridic_release"):
        paused = {row[1] for row in db.execute("PRAGMA table_info(veridic_paused_runs)")}
        if "claim_sha256" in paused:
            return 10
        calls = {row[1] for row in db.execute("PRAGMA table_info(veridic_model_calls)")}
        if "options_sha256" in calls:
            return 9
        answers = {row[1] for row in db.execute("PRAGMA table_info(veridic_model_replies)")}
        return 8 if _USAGE_PARTS[0] in answers else 7
    columns = {row[1] for row in db.execute("PRAGMA table_info(veridic_audit)")}
    if "call_id" in columns:
        return 6
    if "duration" in columns:
        return 5
    if _has_table(db, "veridic_approval_rules"):
        return 4
    if "record_id" in columns:
        return 3
    return 2 if _has_table(db, "veridic_model_replies") else 1


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    row = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return row.fetchone() is not None


def _create(db: sqlite3.Connection) -> None:
    """An empty database: the whole schema of version 1 (the later steps add to it)."""
    db.execute(_AUDIT_TABLE.format(name="veridic_audit", approvals=_APPROVALS_1))
    db.execute(_AUDIT_INDEX)
    db.execute(_MODEL_CALLS)
    db.execute(_CALLS_INDEX)


def _to_2(db: sqlite3.Connection) -> None:
    """Refused calls are ``not_asked``; the reply and conversation tables."""
    # SQLite cannot change a CHECK constraint in place: copy into a new table.
    db.execute(_AUDIT_TABLE.format(name="veridic_audit_2", approvals=_APPROVALS_2))
    db.execute(
        "INSERT INTO veridic_audit_2 SELECT id, time, request_id, tool, kind, risk, "
        "CASE WHEN outcome = 'refused' THEN 'not_asked' ELSE approval END, "
        "wrote_instruction_fields, irreversible, prompt_sha256, tools_sha256, outcome, detail, "
        "operations FROM veridic_audit ORDER BY id"
    )
    db.execute("DROP TABLE veridic_audit")
    db.execute("ALTER TABLE veridic_audit_2 RENAME TO veridic_audit")
    db.execute(_AUDIT_INDEX)
    for statement in _ADDED_IN_2:
        db.execute(statement)


def _to_3(db: sqlite3.Connection) -> None:
    """Each record its own id: audit rows and model calls get one, an answer its call's."""
    for table, column in (("veridic_audit", "record_id"), ("veridic_model_calls", "call_id")):
        db.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
        db.execute(f"UPDATE {table} SET {column} = lower(hex(randomblob(16)))")
        db.execute(f"CREATE UNIQUE INDEX {table}_{column} ON {table} ({column})")
    db.execute("ALTER TABLE veridic_model_replies ADD COLUMN call_id TEXT")
    db.execute("CREATE INDEX veridic_model_replies_call_id ON veridic_model_replies (call_id)")


def _to_4(db: sqlite3.Connection) -> None:
    """Approval rules and paused runs, so an approval asked on one host is answered on another."""
    db.execute(
        "CREATE TABLE veridic_approval_rules (id INTEGER PRIMARY KEY, time REAL NOT NULL, "
        "scope TEXT NOT NULL, document TEXT NOT NULL)"
    )
    db.execute("CREATE INDEX veridic_approval_rules_scope ON veridic_approval_rules (scope, id)")
    db.execute(
        "CREATE TABLE veridic_paused_runs (id INTEGER PRIMARY KEY, time REAL NOT NULL, "
        "request_id TEXT NOT NULL, document TEXT NOT NULL, claimed REAL)"
    )
    db.execute("CREATE INDEX veridic_paused_runs_request ON veridic_paused_runs (request_id, id)")


_ANSWER: Final = (
    "call_id, time, request_id, prompt_sha256, response_id, model, stop_reason, tool_calls, "
    "input_tokens, output_tokens, latency"
)
"""Every column of an answer's row at version 4 but its key: rows alike in all are repeats."""


def _to_5(db: sqlite3.Connection) -> None:
    """Durations, argument digests, vouches; one answer per call."""
    db.execute("ALTER TABLE veridic_audit ADD COLUMN duration REAL NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE veridic_audit ADD COLUMN arguments_sha256 TEXT NOT NULL DEFAULT ''")
    # Exact repeats (a write sent twice) are dropped; an answer that differs from its call's
    # first is kept, unlinked (NULL, as answers recorded before calls had ids): deleting it
    # with the repeats lost what the model answered, without a word.
    db.execute(
        "DELETE FROM veridic_model_replies WHERE call_id IS NOT NULL AND id NOT IN "
        f"(SELECT MIN(id) FROM veridic_model_replies WHERE call_id IS NOT NULL GROUP BY {_ANSWER})"
    )
    db.execute(
        "UPDATE veridic_model_replies SET call_id = NULL WHERE call_id IS NOT NULL AND id NOT IN "
        "(SELECT MIN(id) FROM veridic_model_replies WHERE call_id IS NOT NULL GROUP BY call_id)"
    )
    db.execute("DROP INDEX veridic_model_replies_call_id")
    db.execute(
        "CREATE UNIQUE INDEX veridic_model_replies_call_id ON veridic_model_replies (call_id)"
    )
    db.execute(
        "CREATE TABLE veridic_vouches (id INTEGER PRIMARY KEY, time REAL NOT NULL, "
        "policy TEXT NOT NULL, reason TEXT NOT NULL, caller TEXT NOT NULL, "
        "sample TEXT NOT NULL, record_id TEXT NOT NULL UNIQUE)"
    )
    db.execute("CREATE INDEX veridic_vouches_policy ON veridic_vouches (policy, id)")


def _to_6(db: sqlite3.Connection) -> None:
    """The tool-call id of each call's record (earlier rows: ``""``, none recorded)."""
    db.execute("ALTER TABLE veridic_audit ADD COLUMN call_id TEXT NOT NULL DEFAULT ''")


_TIMED: Final = ("veridic_audit", "veridic_model_calls", "veridic_model_replies", "veridic_vouches")
"""The tables a review reads by time range (``since``, ``until``): each has an index on ``time``."""


def _to_7(db: sqlite3.Connection) -> None:
    """An index on ``time`` for each table read by time range; the release that wrote the file."""
    for table in _TIMED:
        db.execute(f"CREATE INDEX IF NOT EXISTS {table}_time ON {table} (time)")
    db.execute("CREATE TABLE veridic_release (release TEXT NOT NULL)")


_USAGE_PARTS: Final = (
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "reasoning_output_tokens",
)
"""The columns of an answer's usage parts, from 8 on, named as :class:`~veridic.providers.Usage`
names them."""


def _to_8(db: sqlite3.Connection) -> None:
    """The parts of each answer's usage; earlier answers' NULL, unknown."""
    for column in _USAGE_PARTS:
        db.execute(f"ALTER TABLE veridic_model_replies ADD COLUMN {column} INTEGER")


def _to_9(db: sqlite3.Connection) -> None:
    """The digest of each model call's options; earlier calls' ``""``, not recorded."""
    db.execute("ALTER TABLE veridic_model_calls ADD COLUMN options_sha256 TEXT NOT NULL DEFAULT ''")


_ANSWER_10: Final = (
    "time, request_id, prompt_sha256, response_id, model, stop_reason, tool_calls, "
    "input_tokens, output_tokens, latency, call_id, cache_read_input_tokens, "
    "cache_creation_input_tokens, reasoning_output_tokens"
)
"""The columns of an answer's row at version 10 but its key and id, in the order of the
insert whose values :func:`~veridic.run._store.unlinked_sha256` keys."""


def _to_10(db: sqlite3.Connection) -> None:
    """Claim tokens of paused runs; the key of each answer that names no call."""
    db.execute("ALTER TABLE veridic_paused_runs ADD COLUMN claim_sha256 TEXT")
    db.execute("ALTER TABLE veridic_model_replies ADD COLUMN unlinked_sha256 TEXT")
    unlinked = db.execute(
        f"SELECT id, {_ANSWER_10} FROM veridic_model_replies WHERE call_id IS NULL ORDER BY id"
    ).fetchall()
    db.executemany(
        "UPDATE veridic_model_replies SET unlinked_sha256 = ? WHERE id = ?", unlinked_keys(unlinked)
    )
    db.execute(
        "CREATE UNIQUE INDEX veridic_model_replies_unlinked "
        "ON veridic_model_replies (unlinked_sha256)"
    )


_LACKS: Final[dict[int, str]] = {
    2: "they have record ids given by the migration, not by the call",
    4: "they have no duration (0.0) and no arguments digest",
    5: 'they have no call id (call_id "")',
    7: (
        "their answers' usage is not broken down (their cache reads, cache writes and "
        "reasoning are unknown)"
    ),
    8: (
        'their model calls have no digest of the request\'s options (options_sha256 ""), so '
        "which structured-output schema the model was given is not on record"
    ),
    9: "their paused runs claimed before have no claim token (which no review reads)",
}
"""For each older version, what its records lack once migrated (a migration cannot know
it), in words for a report."""


def lacks(version: int) -> str:
    """What the records of a file of ``version`` lack once migrated; ``""`` for none."""
    return "; ".join(_LACKS[v] for v in sorted(_LACKS) if v >= version)


_STEPS: Final[tuple[Callable[[sqlite3.Connection], None], ...]] = (
    _create,
    _to_2,
    _to_3,
    _to_4,
    _to_5,
    _to_6,
    _to_7,
    _to_8,
    _to_9,
    _to_10,
)
"""``_STEPS[v]`` takes a database of version ``v`` to ``v + 1`` (version 0: empty)."""
