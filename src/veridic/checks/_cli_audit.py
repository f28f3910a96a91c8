"""``veridic audit``: the audit store's questions answered, with the store opened read-only.

The store under review is often evidence, so it is opened in ways that cannot
write it: an SQLite file is checked through a read-only connection and copied
before it is opened, a Postgres database is opened ``read_only``. ``veridic
show`` opens stores through the same functions.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Final, TextIO

from veridic._counted import counted
from veridic._sample import clip
from veridic._workflow_commands import inert_line
from veridic.checks._ci_log import inert_json
from veridic.checks._cli_report import (
    EXIT_USAGE,
    _say,
    _UsageError,
)
from veridic.checks.audit_report import AuditReport, Selection, parse_time, stream_report
from veridic.errors import AuditRecordError, VeridicError
from veridic.run._conninfo import LIBPQ_KEYWORDS, conninfo_keywords, without_passwords
from veridic.run._postgres_schema import VERSION, lacks
from veridic.run._sqlite_schema import VERSION as SQLITE_VERSION
from veridic.run._sqlite_schema import lacks as sqlite_lacks
from veridic.run.audit import SQLiteAuditSink
from veridic.run.postgres import PostgresAuditSink  # needs psycopg only when one is opened


def _run_audit(args: argparse.Namespace, out: TextIO) -> int:
    """``veridic audit``: print the report; exit 1 on an always-rule instruction write."""
    with tempfile.TemporaryDirectory(prefix="veridic-audit-") as snapshots:
        return _audit_report(args, out, Path(snapshots))


def _audit_report(args: argparse.Namespace, out: TextIO, snapshots: Path) -> int:
    try:
        selection = Selection(
            request_ids=tuple(args.request),
            since=None if args.since is None else parse_time(args.since, option="--since"),
            until=None if args.until is None else parse_time(args.until, option="--until"),
        )
        if (
            selection.since is not None
            and selection.until is not None
            and selection.since >= selection.until
        ):
            raise _UsageError(
                f"--since {args.since} is not before --until {args.until}: the range is empty; "
                "--since is inclusive and --until exclusive"
            )
        store, migrated = _opened(args.database, snapshots)
    except (ValueError, _UsageError) as error:
        # A message quotes the argument ("no such file"): hide a password it holds.
        _say("audit", without_passwords(str(error), args.database), sys.stderr)
        return EXIT_USAGE
    # Written to a file first, as the store is read (a report of a whole store holds a page
    # of its records at a time, not all of them): a row that cannot be read back, found
    # half-way, fails the command with nothing printed, as before.
    with tempfile.TemporaryFile("w+", encoding="utf-8", dir=snapshots) as written:
        try:
            report = stream_report(store, selection, database=_named(store, args.database))
            if isinstance(store, PostgresAuditSink) and store.schema_version != VERSION:
                migrated = _not_migrated(store.schema_version)
            if migrated:
                report = dataclasses.replace(report, notes=(*report.notes, migrated))
            written.writelines(_rendered(report, args.format))
        except VeridicError as error:  # a row that cannot be read back
            named = _named(store, args.database)
            _say("audit", f"{named}: {without_passwords(str(error), args.database)}", sys.stderr)
            return EXIT_USAGE
        finally:
            store.close()
        written.seek(0)
        shutil.copyfileobj(written, out)
    return report.exit_code()


def _rendered(report: AuditReport, form: str) -> Iterator[str]:
    """The report in ``form``, a piece at a time, inert in a CI log: a record quotes
    outside text (a tool's error, a server's words)."""
    if form == "json":
        # "##[" stands inside one JSON string, never across two pieces.
        yield from map(inert_json, report.json_chunks())
        yield "\n"
        return
    lines = report.markdown_lines() if form == "markdown" else report.text_lines()
    yield from (inert_line(line) + "\n" for line in lines)


def _not_migrated(version: int) -> str:
    """The report's note on a Postgres store of an older schema, read as it is (read-only)."""
    return (
        f"the database holds audit schema version {version}, and was read as it is, not "
        f"migrated to version {VERSION} (a review never writes it): {lacks(version)}"
    )


_URL_SCHEMES: Final = ("postgresql://", "postgres://")
"""The schemes of a URL libpq reads, in the case it reads them (it compares them exactly)."""


def _is_postgres(store: str) -> bool:
    """Whether ``veridic audit``'s argument names a Postgres database rather than a file.

    A Postgres database is named by a ``postgresql://`` or ``postgres://`` URL, or by a
    libpq connection string whose every keyword libpq knows (``host=db user=audit``; the
    database may come from ``PGDATABASE``). Anything else is the path of a file, which
    is never created. The text ``dbname=`` decided before: a path holding it
    (``/srv/dbname=app/audit.db``) was read as a conninfo, and a conninfo without it
    as a file that did not exist.

    Raises:
        _UsageError: an existing file is named like a connection string (which was
            meant is not for veridic to guess), or the argument is neither a file nor a
            connection string (one of its keywords is not libpq's, or it is a URL whose
            scheme is not in lower case, which libpq does not read as one), or it holds
            a NUL character, where libpq would stop reading it.
    """
    if store.startswith(_URL_SCHEMES):
        return True
    if store.lower().startswith(_URL_SCHEMES) and not os.path.lexists(store):
        raise _UsageError(
            f"{store}: libpq reads a URL only by its scheme in lower case, and reads this as "
            "neither a URL nor a connection string: write postgresql:// (or postgres://)"
        )
    try:
        keywords = conninfo_keywords(store)
    except AuditRecordError as error:  # a NUL, after which libpq would read nothing
        raise _UsageError(str(error)) from error
    if keywords is None:
        return False
    unknown = [keyword for keyword in keywords if keyword not in LIBPQ_KEYWORDS]
    exists = os.path.lexists(store)
    if not unknown and exists:
        raise _UsageError(
            f"{store}: is both an existing file and a libpq connection string: write the "
            f"file's path with a directory (./{store}), or name the database by a "
            "postgresql:// URL"
        )
    if unknown and not exists:
        raise _UsageError(
            f"{store}: no such file (looked from {os.getcwd()}), and not a libpq connection "
            f"string either: it has {_unknown(unknown)}; pass the path of an "
            "SQLite audit database, a postgresql:// URL, or a connection string "
            "('host=db dbname=app user=audit')"
        )
    return not unknown


def _unknown(keywords: list[str]) -> str:
    """The keywords libpq does not know, counted and quoted, for an error."""
    shown = ", ".join(map(clip, keywords))
    return f"{counted(len(keywords), 'keyword')} libpq does not know ({shown})"


def _named(store: SQLiteAuditSink | PostgresAuditSink, argument: str) -> str:
    """How the report names the store: the path given, or the conninfo without its password."""
    return repr(store) if isinstance(store, PostgresAuditSink) else argument


def _open_store(argument: str, snapshots: Path) -> SQLiteAuditSink | PostgresAuditSink:
    """The store ``argument`` names, opened so that it is never written."""
    return _opened(argument, snapshots)[0]


def _opened(argument: str, snapshots: Path) -> tuple[SQLiteAuditSink | PostgresAuditSink, str]:
    """:func:`_open_store`, with the report's note on an SQLite file of an older schema
    (its copy was migrated: what the migration could not know), ``""`` for none."""
    if not _is_postgres(argument):
        copy, version = _open_audit_store(Path(argument), snapshots)
        return copy, _copy_migrated(version)
    try:
        database = PostgresAuditSink(argument, min_size=0, max_size=1, timeout=10, read_only=True)
    except VeridicError as error:  # no extra, no veridic tables, another schema version
        raise _UsageError(without_passwords(str(error), argument)) from error
    except Exception as error:  # psycopg's own: it is imported only with the extra
        # libpq's message runs over lines ("...failed: Connection refused\n\tIs the server
        # running..."): one line, as every other usage error.
        words = " ".join(str(error).split())
        said = without_passwords(f"{type(error).__name__}: {words}", argument)
        raise _UsageError(
            f"cannot reach the Postgres audit store ({said}): check "
            "the URL or conninfo, and that the server is up"
        ) from error
    # Read as it is: _audit_report notes an older schema (_not_migrated).
    return database, ""


def _copy_migrated(version: int) -> str:
    """The report's note on an SQLite file of an older schema, whose copy was migrated: the
    file's earlier records were read with what the migration gave them (usage parts
    unknown, no call ids), which the report must not pass off as recorded."""
    if version >= SQLITE_VERSION:
        return ""
    return (
        f"the file holds audit schema version {version}; its copy was migrated to version "
        f"{SQLITE_VERSION} for this review (the file itself is never written), so the records "
        f"written before: {sqlite_lacks(version)}"
    )


def _open_audit_store(path: Path, snapshots: Path) -> tuple[SQLiteAuditSink, int]:
    """A snapshot of an existing veridic audit database, opened as a store; never the file.

    The file is read through a read-only connection only: anything that is
    not a veridic audit database is refused, and a veridic one is copied
    whole (SQLite's backup API: a consistent snapshot, even while the
    application writes) into ``snapshots``, where ``SQLiteAuditSink`` opens
    it (and migrates an older schema, in the copy). The database under
    review, often evidence, is never written: not by a migration, not by
    the WAL setting. The cost is one copy of the file per report. Returns the
    store and the schema version of the copy before it was opened (migrated).
    """
    if not path.is_file():
        what = _not_a_file(path)
        raise _UsageError(
            f"{path}: {what} (looked from {os.getcwd()}): pass the path of an existing SQLite "
            "audit database (SQLiteAuditSink(path)); veridic audit never creates one"
        )
    if path.stat().st_size == 0:  # SQLite reads an empty file as an empty database
        raise _UsageError(
            f"{path} is empty (0 bytes), so it holds no audit store: an SQLite store the "
            "application opened but never wrote is empty too, or the path is not the one "
            "the application writes: pass the file SQLiteAuditSink(path) writes"
        )
    try:
        probe = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = probe.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'veridic_audit'"
            ).fetchone()
        finally:
            probe.close()
    except sqlite3.Error as error:
        raise _UsageError(
            f"{path}: cannot be read as an SQLite database ({error}): pass the file "
            "SQLiteAuditSink(path) writes"
        ) from error
    if found is None:
        raise _UsageError(
            f"{path}: is an SQLite database without a veridic_audit table, so not a veridic "
            "audit store; veridic reads a store and never adds one: pass the file "
            "SQLiteAuditSink(path) writes"
        )
    copy = snapshots / "audit.sqlite3"
    try:
        source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        target = sqlite3.connect(copy)
        try:
            source.backup(target)
            (version,) = target.execute("PRAGMA user_version").fetchone()
        finally:
            target.close()
            source.close()
        # veridic 0.1 did not set user_version (its file is version 1, as the store reads it).
        return SQLiteAuditSink(copy), max(int(version), 1)
    except (sqlite3.Error, VeridicError) as error:
        # The store names the file it opened, the snapshot: name the file under review.
        said = str(error).replace(f"SQLiteAuditSink({os.fspath(copy)!r})", "the file")
        raise _UsageError(f"{path}: cannot be opened as an audit store: {said}") from error


def _not_a_file(path: Path) -> str:
    """Why ``path``, which is not a file, is none, in the words of a usage error: a link
    that loops or leads nowhere was said to be "no such file", which sent users looking
    for a file that was there."""
    if path.exists():
        return "is not a file"
    if path.is_symlink():
        return "is a symbolic link that does not lead to a file (it loops, or its target is gone)"
    return "no such file"
