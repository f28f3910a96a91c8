"""The checks a run makes before its first model call, and the choices it makes between calls.

A run refuses what would fail halfway (a policy of another view, a context
some tool cannot take, an async tool in a blocking run) before anything is
sent or run, so that nothing runs twice when the request is sent again; and
it decides, per reply, whether the calls may run concurrently or must wait
for the user. These are :class:`~veridic.ModelGateway`'s, kept apart from
the road a call takes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import BaseModel

from veridic._counted import counted
from veridic._sample import class_named, clip, error_message, message_shown, named
from veridic.errors import AuditWriteError, VeridicError
from veridic.run.approval import ApprovalPolicy
from veridic.run.deferred import needs_answer
from veridic.run.reply import Reply
from veridic.text.prompt import ToolCall
from veridic.tools.context import ToolContext
from veridic.tools.view import ToolView

__all__ = [
    "all_queries",
    "also_raised",
    "check_context",
    "check_defer",
    "check_none_async",
    "check_output_type",
    "check_policy",
    "first_waiting",
]

_log = logging.getLogger("veridic.executor")


def all_queries(reply: Reply) -> bool:
    """Whether every call of ``reply`` is of a query the view exposes (safe to run at once)."""
    view = reply.view
    for call in reply.tool_calls:
        status = view.status(call.name)
        if not status.exposed or status.tool is None or status.tool.kind != "query":
            return False
    return True


def check_output_type(output_type: object) -> None:
    if output_type is not None and not (
        isinstance(output_type, type) and issubclass(output_type, BaseModel)
    ):
        raise VeridicError(
            f"run(output_type={output_type!r}): pass a pydantic model class, whose JSON the "
            "model's last answer must be, or leave it out for a text answer"
        )


def check_defer(defer: object, confirm: object, where: str) -> None:
    if not isinstance(defer, bool):
        raise VeridicError(f"{where}(defer={defer!r}): pass True or False")
    if defer and confirm is not None:
        raise VeridicError(
            f"{where}() got both confirm= and defer=True: either the user is asked during the "
            "run (confirm) or the run stops for their answers (defer); pass one"
        )


def check_context(view: ToolView, context: object, where: str) -> None:
    """Refuse a run whose context some tool of its view cannot take, before any model call.

    One context serves every call of a run; a tool that asks for another
    type (or for one, when none was given) would otherwise fail mid-run,
    after the calls before it ran.
    """
    for tool in view.tools():
        if tool.context is None:
            continue
        try:
            tool.context.bind(context, tool=tool.name, origin=tool.origin, request_id=where)
        except VeridicError as error:
            if isinstance(context, ToolContext):
                raise  # its own message says to pass ctx.deps
            got, why = (
                ("no context (context=None)", "a run without one cannot call it")
                if context is None
                else (
                    f"deps of type {type(context).__name__} as context",
                    f"not a {type(context).__name__}",
                )
            )
            raise VeridicError(
                f"{where}() got {got}, and tool {tool.name!r} ({tool.origin}) of its view asks "
                f"for a {tool.context.expects} (parameter {tool.context.name!r}), {why}: pass "
                f"the application's object as {where}(..., context=...); every call of the run "
                f"gets it (the handler reads {tool.context.name}.deps); nothing was sent or run"
            ) from error


def check_policy(policy: object, view: ToolView, where: str) -> None:
    if not isinstance(policy, ApprovalPolicy) or policy.view is not view:
        raise VeridicError(
            f"{where}() got a policy built for another view ({policy!r}, not for {view!r}): "
            "pass ApprovalPolicy(view, rules=...) of the view the run sends"
        )


def first_waiting(reply: Reply, policy: ApprovalPolicy) -> int | None:
    """The index of the first call of ``reply`` that needs the user's answer, if any."""
    for index, call in enumerate(reply.tool_calls):
        if needs_answer(reply.view, policy, call) is not None:
            return index
    return None


def check_none_async(view: ToolView, calls: Sequence[ToolCall], road: str) -> None:
    """Refuse, before any of ``calls`` runs, a blocking run of calls one of which is async.

    :func:`veridic.execute` refuses an async tool when its turn comes, after
    the calls before it ran (a write among them); the turn was then never
    recorded, so the same request sent again ran them a second time. ``road`` is the
    blocking method that runs them (``run_tools``, ``run``, ``resume``): the message
    names its async twin, the one that can run what it was given (a paused run is
    resumed only by ``aresume``).

    Raises:
        VeridicError: a call names an exposed tool whose handler is async.
    """
    for call in calls:
        status = view.status(call.name)
        if status.exposed and status.tool is not None and status.tool.is_async:
            raise VeridicError(
                f"tool {status.tool.name!r} ({status.tool.origin}) is async, and the reply "
                f"calls it (call {clip(call.id)}) beside "
                f"{counted(len(calls) - 1, 'other call')}: none of them ran; call "
                f"await gateway.a{road}(...) instead of {road}(...), or register a blocking "
                "handler"
            )


def also_raised(raised: BaseException, call: ToolCall, other: BaseException) -> None:
    """Tell, on the error ``raised``, of ``other``, the error of a concurrent ``call``.

    Only one error of a reply's concurrent calls can be raised; another would
    vanish with what it says (a ``confirm`` that broke, a store that failed), and
    the call it stopped, unanswered on the composer, with no word why. A note
    names the call and the error; an unwritten record goes to the log as well
    (:func:`_also_unwritten`).
    """
    if isinstance(other, AuditWriteError):
        _also_unwritten(raised, other)
        return
    raised.add_note(
        f"call {clip(call.id)} ({clip(call.name)}) of the same answer, run at the same "
        f"time, raised too: {named(type(other).__qualname__)}: {clip(error_message(other))}"
    )


def _also_unwritten(raised: BaseException, other: AuditWriteError) -> None:
    """Keep the unwritten record of a concurrent call whose error is not the one raised.

    Another call that ran and whose record could not be written (its
    ``AuditWriteError``) would vanish with its error. Its record goes to the
    ``veridic.executor`` log and a note on the raised error, as a write nobody
    awaits does.
    """
    record = other.result.record
    _log.error(
        "the audit record of tool %r (request %r, outcome %s), a call that ran "
        "concurrently with the one whose error is raised, could not be written (%s); "
        "store it elsewhere: %r",
        record.tool,
        record.request_id,
        record.outcome.value,
        _failed_with(other.__cause__),
        record,
    )
    raised.add_note(
        f"another call of the reply (tool {record.tool!r}) ran and its record could not be "
        "written either: it is in the veridic.executor log"
    )


def _failed_with(failure: BaseException | None) -> str:
    """What the store refused a record with, for one log line: its class and message as
    veridic writes outside text (a driver's message may quote the row it refused)."""
    if failure is None:
        return "the store's error was not kept"
    return f"{class_named(failure)}: {message_shown(failure)}"
