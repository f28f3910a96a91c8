"""How a ``veridic`` command ends: a report and the exit code it makes, or a usage error.

One place decides the exit code from what was found, so it is the same whatever
the format the report is written in (text, JSON, SARIF or Markdown). The exit
codes live here, beside that verdict, and ``veridic.checks.cli`` re-exports
them as the command's public names.
"""

from __future__ import annotations

import codecs
import io
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Final, TextIO

from veridic._counted import counted
from veridic._workflow_commands import inert_line
from veridic.checks._ci_log import inert_json
from veridic.checks.lint import Severity
from veridic.text.terminal_view import visible

EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2


class _UsageError(Exception):
    """The command cannot run as asked; the message says what to change (exit 2)."""


@dataclass(frozen=True, slots=True)
class _Item:
    """One line of a report: a finding (``error``), a ``warning`` or a listed ``info`` item."""

    severity: Severity
    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    subject: str | None = None
    text: str | None = None
    data: tuple[tuple[str, object], ...] = ()

    def where(self) -> str:
        """``file:line``, ``file``, or empty when the item has no place in the source."""
        if self.file is None:
            return ""
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "message": self.message,
            "file": self.file,
            "line": self.line,
        }
        if self.subject is not None:
            out["tool"] = self.subject
        if self.text is not None:
            out["text"] = self.text
        out.update(self.data)
        return out


@dataclass(slots=True)
class _Report:
    """What one command found, rendered as grouped text or JSON."""

    command: str
    target: str
    items: list[_Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)
    strict: bool = False

    def exit_code(self) -> int:
        failing = {"error", "warning"} if self.strict else {"error"}
        return EXIT_FINDINGS if any(i.severity in failing for i in self.items) else EXIT_CLEAN

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "command": self.command,
            "target": self.target,
            "exit_code": self.exit_code(),
            "findings": [i.to_json() for i in self.items if i.severity == "error"],
            "warnings": [i.to_json() for i in self.items if i.severity == "warning"],
            "listed": [i.to_json() for i in self.items if i.severity == "info"],
            "notes": list(self.notes),
        }
        out.update(self.extra)
        return out

    def render(self) -> str:
        """The report for a terminal: every line one line, and no character of it a control.

        Items quote outside text (an MCP server's description, a name in a committed
        manifest, a boot failure's message), so each piece goes through
        :func:`~veridic.text.terminal_view.visible`: an escape sequence, a carriage
        return or a line break shows as ``⟦U+001B⟧`` and cannot conceal a word, erase a
        finding or forge the verdict line.
        """
        counts = {s: sum(1 for i in self.items if i.severity == s) for s in _SECTIONS}
        parts = [counted(n, *_COUNT_WORDS[s]) for s, n in counts.items() if n or s == "error"]
        lines = [f"veridic {self.command} {_shown(self.target)}: {', '.join(parts)}"]
        lines.extend(f"  {_shown(note)}" for note in self.notes)
        for severity, title in _SECTIONS.items():
            chosen = [i for i in self.items if i.severity == severity]
            if not chosen:
                continue
            lines.append("")
            lines.append(f"{title}:")
            kinds = sorted({i.kind for i in chosen})
            for kind in kinds:
                of_kind = [i for i in chosen if i.kind == kind]
                lines.append(f"  {_shown(kind)} ({len(of_kind)})")
                for item in of_kind:
                    head = "  ".join(
                        _shown(part)
                        for part in (item.where(), item.subject, item.text)
                        if part is not None and part != ""
                    )
                    if head:
                        lines.append(f"    {head}")
                        lines.append(f"      {_shown(item.message)}")
                    else:
                        lines.append(f"    {_shown(item.message)}")
        verdict = {
            EXIT_CLEAN: "clean" if not counts["warning"] else "clean (warnings do not fail)",
            EXIT_FINDINGS: "failed",
        }[self.exit_code()]
        if self.strict and counts["warning"] and not counts["error"]:
            verdict = "failed (--strict: warnings fail)"
        lines.append("")
        lines.append(f"result: {verdict} (exit {self.exit_code()})")
        return "\n".join(inert_line(line) for line in lines)


def _say(command: str, message: object, err: TextIO) -> None:
    """``veridic COMMAND: MESSAGE`` on ``err`` as one line, with no character of it a control.

    A usage error quotes what the application raised at import, a store's
    error or a path, all outside text: raw, an escape sequence would act on the
    terminal and a line break would start a line of the CI log with whatever
    follows it, where ``::add-mask::FINDING`` or ``::error file=...::`` is a
    workflow command GitHub Actions obeys. So the message is shown as the
    report's lines are (:func:`_shown`), whole, on one line.
    """
    print(inert_line(f"veridic {command}: {_shown(str(message))}"), file=err)


_NO_DESCRIPTOR: Final = (
    "veridic's standard output and error have no file descriptor while veridic imports "
    "and checks the application: what it prints is filtered there so that a CI log obeys "
    "no workflow command in it, and a descriptor would write past the filter. Run a child "
    "process with stdout=subprocess.PIPE and print what it returns, write with print() "
    "instead of os.write, or keep such work out of import time and boot checks"
)

_LINE_BREAK: Final = re.compile(r"(\r\n|\r|\n)")
"""Where GitHub's runner ends a line of a job's log (.NET's ``ReadLine``)."""


class _InertLines(io.TextIOBase):
    """A text stream that writes each line to ``stream`` with no workflow command in it.

    While the registry commands import and boot the application, what is printed
    goes to standard error through one of these: the application's prints, and
    veridic's own log line of a component that did not start, which quotes the
    boot check's exception (maybe a licence server's answer). A CI log obeyed a
    ``##[error]`` there. Each line is passed through :func:`inert_line`
    when it ends, so a command split over two writes is caught too; the rest of
    a line is written, ended, by :meth:`finish`. Bytes written to :attr:`buffer`
    are decoded and read as text is. One lock keeps the unended line whole when
    threads write at once (an MCP server's stderr is logged from a thread of its own).
    """

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._stream = stream
        self._pending = ""
        self._lock = threading.RLock()  # a signal handler that prints waits for no one
        self._bytes = _InertBytes(self)

    @property
    def encoding(self) -> str:  # type: ignore[override]  # typeshed: an attribute; io: read-only
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def buffer(self) -> _InertBytes:
        """Where bytes are written (``sys.stdout.buffer``): without it, an application
        writing a banner as bytes at import failed to import."""
        return self._bytes

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        """Refused (``io.UnsupportedOperation``): the filter is in this object, not in a
        descriptor, and what is written to a descriptor never passes through it.

        Handing out stderr's own descriptor let ``os.write``, ``faulthandler`` and a child
        process given ``sys.stdout`` write ``##[error]...`` to a CI log past the filter.
        A caller that can do without a descriptor falls back on this error, as it does
        under pytest's capture; one that cannot fails, and the message says what to do.
        """
        raise io.UnsupportedOperation(_NO_DESCRIPTOR)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            parts = _LINE_BREAK.split(self._pending + text)
            self._pending = parts.pop()
            for index in range(0, len(parts), 2):
                self._stream.write(inert_line(parts[index]) + parts[index + 1])
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def finish(self) -> None:
        """Write the unended rest of the last line, ended (what is written next starts a
        line of its own, not the rest of this one), and flush."""
        self._bytes.finish()
        with self._lock:
            if self._pending:
                self._stream.write(inert_line(self._pending) + "\n")
                self._pending = ""
        self._stream.flush()


class _InertBytes:
    """The ``buffer`` of an :class:`_InertLines`: bytes decoded in its encoding (a character
    split over two writes kept whole, bytes that are no text shown escaped) and written
    there as text."""

    def __init__(self, lines: _InertLines) -> None:
        self._lines = lines
        self._decoder = codecs.getincrementaldecoder(lines.encoding)(errors="backslashreplace")

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        """Refused, as :meth:`_InertLines.fileno` is, for the same reason."""
        raise io.UnsupportedOperation(_NO_DESCRIPTOR)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        chunk = bytes(data)
        self._lines.write(self._decoder.decode(chunk))
        return len(chunk)

    def flush(self) -> None:
        self._lines.flush()

    def finish(self) -> None:
        """Write what is left of a character cut short."""
        self._lines.write(self._decoder.decode(b"", final=True))


def _shown(text: str) -> str:
    """``text`` whole, with every control and invisible character as ``⟦U+XXXX⟧``."""
    return visible(text, None)


_SECTIONS: Final[dict[Severity, str]] = {
    "error": "findings (fail the check)",
    "warning": "warnings",
    "info": "listed for review (not findings)",
}
_COUNT_WORDS: Final[dict[Severity, tuple[str, str]]] = {
    "error": ("finding", "findings"),
    "warning": ("warning", "warnings"),
    "info": ("listed for review", "listed for review"),
}


def _emit(report: _Report, form: str, out: TextIO, *, anchor: str | None = None) -> None:
    if form == "json":
        written = json.dumps(report.to_json(), indent=2, sort_keys=True, default=str)
        out.write(inert_json(written) + "\n")
    elif form == "sarif":
        from veridic.checks.sarif import render_sarif  # only this format needs it

        out.write(render_sarif(report.items, command=report.command, anchor=anchor))
    elif form == "markdown":
        from veridic.checks.markdown import render_markdown  # only this format needs it

        markdown = render_markdown(
            report.items,
            command=report.command,
            target=report.target,
            exit_code=report.exit_code(),
            strict=report.strict,
            notes=report.notes,
        )
        out.write("\n".join(map(inert_line, markdown.split("\n"))) + "\n")
    else:
        out.write(report.render() + "\n")
