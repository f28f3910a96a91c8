"""``veridic show``: a saved prompt, or an audit store's model calls, for a reviewer to read.

It runs none of the application's code and reads no configuration, so every
problem is a usage error (exit 2). A store keeps each call's provenance spans
and hashes but not the prompt's text, so its views say where the text can be
kept instead: a prompt document saved by the application.
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Final, TextIO

from veridic._counted import counted
from veridic._workflow_commands import inert_line
from veridic.checks._ci_log import inert_json
from veridic.checks._cli_audit import _is_postgres, _named, _not_a_file, _open_store
from veridic.checks._cli_report import (
    EXIT_CLEAN,
    EXIT_USAGE,
    _say,
    _UsageError,
)
from veridic.checks._cli_write import _write_output
from veridic.checks._regular import NotRegularFileError, open_regular
from veridic.checks.audit_report import _call_json, _when
from veridic.errors import VeridicError
from veridic.run._conninfo import without_passwords
from veridic.run.audit import SQLiteAuditSink
from veridic.run.postgres import PostgresAuditSink  # needs psycopg only when one is opened
from veridic.run.records import ModelCallRecord
from veridic.text.document import _span_json
from veridic.text.prompt import DOCUMENT_FORMAT, PromptDocument
from veridic.text.terminal_view import (
    render_recorded_spans,
    render_terminal,
    use_colour,
    visible,
)

_SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_NAME: Final = 64
"""Tool names and request ids are shown whole up to 64 characters (the longest tool name
a registry takes), so two of them never show alike; a longer one is clipped."""
_SAVE_DOCUMENT: Final = (
    "to see the text, save prompt.to_document() where the application sends the prompt "
    "(for example next to its audit store) and run veridic show FILE.json"
)


def _run_show(args: argparse.Namespace, out: TextIO) -> int:
    """``veridic show``: print (or write) the view; every problem is a usage error, exit 2."""
    colour = args.color == "always" or (
        args.color == "auto" and args.output is None and use_colour(out)
    )
    try:
        if args.output is not None:
            _refuse_writing_over(args.source, args.output)
        with tempfile.TemporaryDirectory(prefix="veridic-show-") as snapshots:
            text = _show(args, Path(snapshots), colour)
        if args.output is None:
            shown = _inert(text, args.format)
            out.write(_page(shown, out) if args.format == "html" else _writable(shown, out))
            return EXIT_CLEAN
        replaced = _write_output(args.output, text)
    except _UsageError as error:
        # A message quotes the argument ("no such file"): hide a password it holds.
        _say("show", without_passwords(str(error), args.source), sys.stderr)
        return EXIT_USAGE
    said = ", replacing the file that was there" if replaced else ""
    out.write(_writable(f"wrote {args.output}{said}\n", out))
    return EXIT_CLEAN


def _refuse_writing_over(source: str, output: Path) -> None:
    """Refuse ``-o`` naming the file shown (itself, or through a link): the view written
    there replaced the audit store or the document it was read from, and said only "wrote".
    Refuse as well a companion file SQLite keeps beside a store (``-wal``, ``-shm``,
    ``-journal``): replacing the write-ahead log lost the calls it held, or had SQLite
    read the view as a log.
    """
    if _is_postgres(source) or not os.path.isfile(source):  # reading it says what it is
        return
    try:
        same = output.exists() and os.path.samefile(source, output)
    except OSError:  # the source is missing or unreadable: reading it will say so
        return
    if same:
        raise _UsageError(
            f"-o {visible(str(output), None)} is the file it shows ({visible(source, None)}): "
            "the view written there would replace the store or document it was read from: "
            "choose another path with -o"
        )
    if _is_sqlite(Path(source)) and _companion_of(Path(source), output):
        raise _UsageError(
            f"-o {visible(str(output), None)} is a companion file SQLite keeps beside the "
            f"store it shows ({visible(source, None)}): the view written there would replace "
            "the store's log or journal and lose or corrupt its records: choose another path "
            "with -o"
        )


_COMPANIONS: Final = ("-wal", "-shm", "-journal")
"""The files SQLite names after a database, in the database's folder."""


def _companion_of(store: Path, output: Path) -> bool:
    """Whether ``output`` names one of ``store``'s companion files, beside the path given or
    beside the file a link names (where SQLite keeps them), whether it exists yet or not."""
    wanted = {
        os.path.realpath(f"{base}{suffix}")
        for base in (store, store.resolve())
        for suffix in _COMPANIONS
    }
    return os.path.realpath(output) in wanted


def _inert(text: str, form: str) -> str:
    """``text`` as printed, with nothing in it a GitHub Actions log obeys.

    A store's calls quote a request id (an HTTP client's request-id header, maybe)
    and a model name: ``##[error]...`` there forged an annotation in the job's log,
    ``##[add-mask]...`` hid text, as ``veridic audit`` of the same store does not
    let them. JSON stays the same document (:func:`inert_json`). HTML stays the same
    page: a user turn or a verbatim block keeps its line breaks in it, so a line of
    the page could begin ``::error ...``; the colon and bracket that would make a
    command are written as character references (``&#58;``, ``&#91;``), which a
    browser shows as the characters. A page written with ``-o`` is left as it is.
    """
    if form == "json":
        return inert_json(text)
    if form == "html":
        return "\n".join(map(_no_html_workflow_command, text.split("\n")))
    return "\n".join(map(inert_line, text.split("\n")))


def _no_html_workflow_command(line: str) -> str:
    """A line of the page with no workflow command in it (see :func:`_inert`): the page's
    own markup never starts a line with ``::`` nor holds ``##[``, so what does is text."""
    line = line.replace("##[", "##&#91;")
    body = line.lstrip()
    if body.startswith("::"):
        return f"{line[: len(line) - len(body)]}&#58;{body[1:]}"
    return line


def _writable(text: str, out: TextIO) -> str:
    """``text`` as ``out`` can write it: a character its encoding lacks as a ``\\u`` escape.

    The view writes its chips (``⟦U+202E⟧``), the data's mark and the prompt's own letters;
    a standard output in ASCII or a legacy code page (``PYTHONIOENCODING``, a Windows pipe
    in cp1252) refused them with a ``UnicodeEncodeError`` traceback instead of the view.
    Escaped as a Python literal escapes them, the way the samples already are.
    """
    encoding = getattr(out, "encoding", None)
    if not isinstance(encoding, str):
        return text
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: the stream will say so itself
        return text
    return text


def _page(page: str, out: TextIO) -> str:
    """The HTML page as ``out`` writes it, to show in a browser as the page written with ``-o``.

    The page says it is UTF-8 (``<meta charset="utf-8">``): on a stream in another encoding
    (a Windows pipe in cp1252) an ``é`` went out as a byte a browser reading UTF-8 shows as
    U+FFFD, and a character the encoding lacked as the six letters of its ``\\u`` escape.
    There every character past ASCII is written as a character reference (``&#233;``),
    which a browser shows as the character: the page's style sheet is ASCII, so it and the
    hash its policy allows it by are unchanged.
    """
    encoding = getattr(out, "encoding", None)
    if not isinstance(encoding, str) or _utf_8(encoding):
        return page
    return page.encode("ascii", "xmlcharrefreplace").decode("ascii")


def _utf_8(encoding: str) -> bool:
    """Whether ``encoding`` is UTF-8 (by any of its names); one Python does not know is not."""
    try:
        return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")
    except LookupError:
        return False


def _show(args: argparse.Namespace, snapshots: Path, colour: bool) -> str:
    source: str = args.source
    postgres = _is_postgres(source)
    if not postgres:
        _require_regular(Path(source))
    if postgres or _is_sqlite(Path(source)):
        store = _open_store(source, snapshots)
        try:
            return _show_store(store, _named(store, source), args, colour)
        except VeridicError as error:  # a row that cannot be read back
            raise _UsageError(f"{source}: {error}") from error
        finally:
            store.close()
    document = _read_document(Path(source))
    if args.call is not None:
        raise _UsageError(
            f"--call {args.call}: {source} is a prompt document, not an audit store; "
            "--call picks a model call of a store (veridic show STORE --call CALL_ID)"
        )
    if args.format == "html":
        return document.to_html()
    if args.format == "json":
        return document.to_json() + "\n"
    note = (
        f"{visible(source, None)}: a prompt document ({DOCUMENT_FORMAT}); its text matches "
        "its sha256\n\n"
    )
    return note + render_terminal(document, colour=colour, separators=args.separators)


def _require_regular(path: Path) -> None:
    """Refuse a path that exists and is not a regular file (a FIFO, a device, a socket).

    Opening a FIFO waits for a writer that may never come, and a device may never end:
    ``show`` would hang instead of saying what is wrong. A missing path or a directory is
    left to :func:`_read_document`, which says so.
    """
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise _not_regular(path)


def _not_regular(path: Path) -> _UsageError:
    return _UsageError(
        f"{visible(str(path), None)} is not a regular file (a FIFO, a device or a socket), "
        "so it is not read: pass a prompt document saved to a file (the JSON text of "
        "prompt.to_document()) or an audit store (an SQLite file, a postgresql:// URL)"
    )


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading, refused (:class:`_UsageError`) unless it is a regular file.

    :func:`_require_regular` looks before the open, and the path may be swapped for a
    FIFO in between (it is a pull request's): :func:`~veridic.checks._regular.open_regular`
    checks what was opened, without waiting on the open.
    """
    try:
        return open_regular(path)
    except NotRegularFileError as error:
        raise _not_regular(path) from error


def _is_sqlite(path: Path) -> bool:
    """Whether ``path`` is an SQLite database file (read by its header, never opened)."""
    try:
        with _open_regular(path) as file:
            return file.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except (OSError, _UsageError):  # what is no regular file is no store: reading says so
        return False


def _read_document(path: Path) -> PromptDocument:
    if not path.is_file():
        what = _not_a_file(path)
        raise _UsageError(
            f"{path}: {what} (looked from {os.getcwd()}): pass a prompt document (the JSON "
            "text of prompt.to_document()) or an audit store (an SQLite path, a postgresql:// "
            "URL)"
        )
    data = _read_capped(path)
    if not data.strip():
        raise _UsageError(
            f"{path} is empty ({counted(len(data), 'byte')}), so it holds no prompt document: "
            f"an SQLite audit store the application opened but never wrote is empty too. "
            f"{_SOURCES}"
        )
    try:
        return PromptDocument.from_json(data)
    except VeridicError as error:
        hint = f"; if you meant an audit store, {_A_STORE}" if not _json(data) else ""
        raise _UsageError(f"{path}: {error}{hint}") from error


_LARGEST_DOCUMENT: Final = 256 * 1024 * 1024
"""Bytes a prompt document may hold: far more than the longest context a model reads (a
2M-token prompt is about 8M characters, 48 MB as a document with every character past
ASCII escaped), and little enough to parse in the memory of a CI runner."""


def _read_capped(path: Path) -> bytes:
    """``path``'s bytes, refused unread past :data:`_LARGEST_DOCUMENT`.

    The document is parsed whole and then rendered, which takes several times its size
    in memory: a log or a dump passed by mistake took the machine's memory instead of
    being named. At most one byte past the cap is read, so a file that grows while it
    is read is refused too. What is opened must be a regular file (:func:`_open_regular`).
    """
    try:
        with _open_regular(path) as file:
            size = os.fstat(file.fileno()).st_size
            data = b"" if size > _LARGEST_DOCUMENT else _read_at_most(file, size)
    except OSError as error:
        raise _UsageError(f"{path}: cannot be read ({error})") from error
    if size > _LARGEST_DOCUMENT or len(data) > _LARGEST_DOCUMENT:
        raise _UsageError(
            f"{path} is {max(size, len(data)):,} bytes, larger than the "
            f"{_LARGEST_DOCUMENT >> 20} MiB a prompt document may hold, so it is not read: "
            "pass the document the application saved (the text of prompt.to_document()), "
            "or, for the audit of many calls, the store itself (veridic show STORE lists "
            "its calls)"
        )
    return data


def _read_at_most(file: BinaryIO, size: int) -> bytes:
    """The ``size`` bytes ``fstat`` said the file holds, and any it grew by meanwhile (or a
    file that says 0, as ``/proc`` does), up to one byte past :data:`_LARGEST_DOCUMENT`.

    ``file.read(n)`` sets ``n`` bytes aside before it reads any: asked for the cap, it
    took 256 MiB for a document of a few KB, and a runner with a memory limit failed.
    """
    data = file.read(size + 1)
    if len(data) <= size:
        return data  # all of it: the file did not grow
    chunks = [data]
    held = len(data)
    while held <= _LARGEST_DOCUMENT and (
        more := file.read(min(_CHUNK, _LARGEST_DOCUMENT + 1 - held))
    ):
        chunks.append(more)
        held += len(more)
    return b"".join(chunks)


_CHUNK: Final = 1024 * 1024
"""Bytes read at a time past the size the file said it had."""


_A_STORE: Final = (
    "pass the SQLite database the application's SQLiteAuditSink writes (its path) or the "
    "Postgres one (a postgresql:// URL) as SOURCE"
)
_SOURCES: Final = (
    "veridic show SOURCE reads a prompt document (save the text of prompt.to_document() "
    f"to the file) or an audit store: {_A_STORE}"
)


def _json(data: bytes) -> bool:
    """Whether ``data`` parses as JSON at all (a document or not): when it does not, the
    file may have been meant as something else, such as a store."""
    try:
        json.loads(data)
    except RecursionError:  # JSON nested past the recursion limit, as from_json() said
        return True
    except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
        return False
    return True


def _show_store(
    store: SQLiteAuditSink | PostgresAuditSink,
    name: str,
    args: argparse.Namespace,
    colour: bool,
) -> str:
    if args.format == "html":
        raise _UsageError(
            f"{name} is an audit store, which keeps each model call's provenance and hashes, "
            f"not the prompt's text, so it has no provenance map to write; {_SAVE_DOCUMENT} "
            "--format html -o OUT.html"
        )
    calls = store.model_calls()
    if args.call is None:
        return _call_list(name, calls, args.format)
    chosen = [call for call in calls if call.call_id == args.call]
    if not chosen:
        raise _UsageError(
            f"{name} has no model call {visible(args.call)} ({len(calls)} recorded): list "
            f"them with veridic show {name}, and pass a call id from its list"
        )
    return _one_call(name, chosen[0], args.format, colour)


def _call_list(name: str, calls: Sequence[ModelCallRecord], form: str) -> str:
    if form == "json":
        document = {"store": name, "model_calls": [_call_json(call) for call in calls]}
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    if not calls:
        return f"{visible(name, None)}: no model calls recorded\n"
    rows = [("time", "request", "call id", "model", "prompt sha256")] + [
        (
            _when(call.time),
            visible(call.request_id, _NAME),
            call.call_id,
            visible(call.model, 40),
            call.prompt_sha256,
        )
        for call in calls
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = [f"{visible(name, None)}: {counted(len(calls), 'model call')}, in the order sent", ""]
    lines += [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  "
        + row[4]
        for row in rows
    ]
    lines += ["", f"show one with: veridic show {visible(name, None)} --call CALL_ID"]
    return "\n".join(lines) + "\n"


_NO_OPTIONS_DIGEST: Final = "(not recorded: a call written before audit schema 9)"
"""What ``veridic show`` says of a call whose record has no digest of the request's options."""


def _one_call(name: str, call: ModelCallRecord, form: str, colour: bool) -> str:
    spans = call.instruction_spans
    if form == "json":
        document = {
            "store": name,
            "model_call": _call_json(call),
            "instruction_spans": [_span_json(s) for s in spans],
            "text_stored": False,
        }
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    length = max((s.end for s in spans), default=0)
    lines = [
        f"model call {call.call_id} of request {visible(call.request_id, None)}",
        f"  store          {visible(name, None)}",
        f"  time           {_when(call.time)}",
        f"  api            {visible(call.api, None)}",
        f"  model          {visible(call.model, None)}",
        f"  prompt sha256  {call.prompt_sha256}",
        f"  tools sha256   {call.tools_sha256}",
        f"  options sha256 {call.options_sha256 or _NO_OPTIONS_DIGEST}",
        f"  tools          {', '.join(visible(t, _NAME) for t in call.tools) or '(none)'}",
        f"  streamed       {'yes' if call.streamed else 'no'}",
        "",
    ]
    if spans:
        lines.append(
            f"system message provenance: {counted(len(spans), 'span')}, {counted(length, 'char')}; "
            "the store "
            "keeps the spans and hashes, not the text:"
        )
        body = render_recorded_spans(spans, colour=colour)
    else:
        lines.append("system message provenance: none (the prompt had no system message)")
        body = ""
    note = (
        f"\nThe prompt's text is not stored in the audit store; {_SAVE_DOCUMENT} (its "
        f"sha256 is {call.prompt_sha256}).\n"
    )
    return "\n".join(lines) + "\n" + body + note
