"""The methods every SQL audit store has, written once over the statements of ``_store``.

A store (:class:`~veridic.SQLiteAuditSink`, the Postgres stores) inherits
:class:`SQLStore` for blocking code or :class:`AsyncSQLStore` for the event
loop and supplies only how a :class:`~veridic.run._store.Statement` reaches
its database, so every store answers every question alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from veridic.run import _store as _statements
from veridic.run._store import Statement, T
from veridic.run.approval import ApprovalMode
from veridic.run.deferred import PausedRun
from veridic.run.records import AuditRecord, ModelCallRecord, ModelReplyRecord, Substitution
from veridic.text.conversation import Conversation
from veridic.text.trust_policy import VouchRecord

__all__ = ["AsyncSQLStore", "SQLStore"]


class SQLStore:
    """Every method of a blocking SQL audit store, given :meth:`_run`.

    A subclass sends a :class:`Statement` to its database in one committed
    transaction and returns the rows, or raises; nothing else differs.
    """

    def _run(self, statement: Statement[T]) -> T:
        raise NotImplementedError

    def _insert(self, statement: Statement[None]) -> None:
        """Commit ``statement``, the :data:`INSERT` of a record, as :meth:`_run` would.

        The one statement sent once per tool call: a store may send it more
        directly (no rows to read back).
        """
        self._run(statement)

    def write(self, record: AuditRecord, /) -> None:
        """Validate ``record`` and commit it before returning.

        A record already stored (the same :attr:`~AuditRecord.record_id`: a
        retry) is not stored again; another record under a stored id is refused.

        Raises:
            AuditRecordError: ``record`` is not a valid :class:`AuditRecord`, or
                the store holds another record under its id (it was not stored;
                it is on the error, as ``.record``).
        """
        self._insert(_statements.write_record(self, record))

    def write_model_call(self, record: ModelCallRecord, /) -> None:
        """Commit a :class:`ModelCallRecord` (what the gateway sent) before returning.

        Raises:
            AuditRecordError: ``record`` is not a :class:`ModelCallRecord`, or the store
                holds another one under its ``call_id`` (as :meth:`write`).
        """
        self._run(_statements.write_model_call(repr(self), record))

    def write_model_reply(self, record: ModelReplyRecord, /) -> None:
        """Commit a :class:`ModelReplyRecord` (what the model answered) before returning.

        Raises:
            AuditRecordError: ``record`` is not a :class:`ModelReplyRecord`, or the store
                holds another one under its ``call_id`` (as :meth:`write`).
        """
        self._run(_statements.write_model_reply(repr(self), record))

    def write_vouch(self, record: VouchRecord, /) -> None:
        """Commit a :class:`~veridic.VouchRecord` (one use of a trust policy) before returning.

        :meth:`TrustPolicy.record_to(store) <veridic.TrustPolicy.record_to>`
        sends every vouch here, before the vouched text is returned.

        Raises:
            AuditRecordError: ``record`` is not a :class:`~veridic.VouchRecord`, or the
                store holds another one under its ``record_id`` (as :meth:`write`).
        """
        self._run(_statements.write_vouch(repr(self), record))

    def records(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]:
        """Every record in the order written, or those of one request, or of a time range.

        ``since`` is inclusive and ``until`` exclusive, in seconds since the epoch.
        The other queries narrow alike, and every store answers them alike.

        Raises:
            AuditRecordError: ``request_id`` holds a NUL or a lone surrogate (no
                record does), or a bound is not seconds (NaN, a word, a bool).
        """
        return self._run(_statements.records(request_id, since, until))

    def model_calls(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelCallRecord, ...]:
        """Every model call in the order sent, narrowed as :meth:`records` is."""
        return self._run(_statements.model_calls(request_id, since, until))

    def model_replies(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelReplyRecord, ...]:
        """Every model answer in the order read, narrowed as :meth:`records` is."""
        return self._run(_statements.model_replies(request_id, since, until))

    def vouches(
        self,
        policy: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[VouchRecord, ...]:
        """Every use of a trust policy in the order written, or of one policy."""
        return self._run(_statements.vouches(policy, since, until))

    def count(self) -> int:
        """How many tool-call records the store holds."""
        return self._run(_statements.count())

    def writes_by_approval(self) -> dict[ApprovalMode, int]:
        """How many write calls were recorded under each approval mode (every mode present).

        Follow-up records (:attr:`AuditRecord.follow_up`) are not calls and are not counted.
        """
        return self._run(_statements.writes_by_approval())

    def instruction_writes_under_always_rule(self) -> tuple[AuditRecord, ...]:
        """Calls that wrote instruction fields approved by an always rule: must be empty.

        The gates make it so; a non-empty answer is a bug to report, with the
        records that prove it.
        """
        return self._run(_statements.instruction_writes_under_always_rule())

    def substitutions(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[Substitution, ...]:
        """For each stopped call, the next call of the same request (or ``None``), in order.

        Follow-up records (:attr:`AuditRecord.follow_up`) are skipped on both
        sides: they record work a call left behind, not a call the model made.
        ``request_id``, ``since`` and ``until`` narrow the stopped calls as
        :meth:`records` narrows records, in the database; the call after one
        is the next of its request even when it falls outside the range.

        Raises:
            AuditRecordError: as :meth:`records`.
        """
        return self._run(_statements.substitutions(request_id, since, until))

    def substitution_rate(self) -> float | None:
        """Of the stopped calls that the model followed with another call in the
        same request, the share whose next call attempted the same operation.

        ``None`` when no stopped call was followed by anything (a stopped call
        that ends its request says nothing about substitution).
        """
        return _statements.substitution_rate(self.substitutions())

    # A review of a whole store, read in pages (veridic.checks.audit_report.stream_report).

    def _last_record_id(self) -> int:
        return self._run(_statements.last_record_id())

    def _records_page(
        self,
        after: int,
        size: int,
        since: float | None,
        until: float | None,
        last: int,
        only: str | None = None,
    ) -> tuple[tuple[int, AuditRecord], ...]:
        return self._run(_statements.records_page(after, size, since, until, last, only))

    def _request_firsts(
        self, since: float | None, until: float | None
    ) -> tuple[tuple[str, float, int], ...]:
        return self._run(_statements.request_firsts(since, until))

    def _rows_of_requests(
        self, request_ids: Sequence[str], since: float | None, until: float | None
    ) -> tuple[tuple[AuditRecord, ...], tuple[ModelCallRecord, ...], tuple[ModelReplyRecord, ...]]:
        """The records, model calls and answers of a page of requests: three statements."""
        return (
            self._run(_statements.records_of(request_ids, since, until)),
            self._run(_statements.model_calls_of(request_ids, since, until)),
            self._run(_statements.model_replies_of(request_ids, since, until)),
        )

    def _model_call_count(self, since: float | None, until: float | None) -> int:
        return self._run(_statements.model_call_count(since, until))

    def _substitutions_between(
        self, between: tuple[int, int | None], since: float | None, until: float | None
    ) -> tuple[Substitution, ...]:
        return self._run(_statements.substitutions(None, since, until, between=between))

    def save_conversation(
        self, key: str, conversation: Conversation, /, *, time: float | None = None
    ) -> None:
        """Store ``conversation`` under ``key`` (a chat's id, a paused run's request id).

        Each save is kept, in order: the store holds how a conversation grew,
        and :meth:`conversation` reads the latest. What is stored holds no
        trust (see :mod:`veridic.text.conversation`).

        Raises:
            AuditRecordError: ``key`` is empty or not storable text, or
                ``conversation`` is not a :class:`~veridic.Conversation`.
        """
        self._run(_statements.save_conversation(repr(self), key, conversation, time))

    def conversation(self, key: str, /) -> Conversation | None:
        """The conversation last saved under ``key``, or ``None`` if none was.

        Raises:
            AuditRecordError: ``key`` is not one :meth:`save_conversation` takes, or
                the stored document is not a conversation (changed in the database by
                hand: the message names the key and says why, as
                :meth:`Conversation.from_json` does).
        """
        return self._run(_statements.conversation(repr(self), key))

    def save_rules(self, scope: str, rules: Mapping[str, str], /) -> None:
        """Keep approval rules (``policy.rules``) under ``scope`` (a user, a tenant).

        Each save is kept; :meth:`rules` reads the latest. Read them back
        through :meth:`ApprovalPolicy.restore <veridic.ApprovalPolicy.restore>`,
        which checks each rule again against the new view. ``policy.rules``
        carries the grant of each "always" rule (:attr:`ApprovalPolicy.grants
        <veridic.ApprovalPolicy.grants>`), which is kept beside the rules and
        read back with them, so a restored rule applies only to the tool it was
        granted for; a plain mapping (``dict(policy.rules)``) keeps the rules
        alone, and each "always" rule is then granted anew to whatever tool the
        view has under its name.

        Raises:
            AuditRecordError: ``scope`` is not storable text, or ``rules`` is not
                a mapping of tool names to rules (text).
        """
        self._run(_statements.save_rules(repr(self), scope, rules))

    def rules(self, scope: str, /) -> dict[str, str]:
        """The rules last saved under ``scope`` (``{}`` if none were).

        Raises:
            AuditRecordError: the stored rules are not what :meth:`save_rules`
                writes (a key given twice, a rule that is not text): the row was
                edited, and is read no way rather than one way of two.
        """
        return self._run(_statements.rules(scope))

    def save_paused(self, paused: PausedRun, /) -> None:
        """Keep a run paused for approvals until one request claims it (:meth:`claim_paused`).

        The same run saved again while it waits is kept once, so a store sends
        the save again after a lost connection, as it does a record; saved
        again after a claim, it waits to be claimed anew.

        Raises:
            AuditRecordError: ``paused`` is not a :class:`~veridic.PausedRun`, or
                its request id could not claim it back (empty, a NUL, a lone surrogate).
            VeridicError: ``paused`` is dated and its approvals were asked without a time
                (:meth:`PausedRun.to_json <veridic.PausedRun.to_json>` says why).
        """
        self._run(_statements.save_paused(repr(self), paused))

    def pending_runs(self) -> tuple[str, ...]:
        """The request ids of runs paused and not claimed yet, oldest first.

        Raises:
            AuditRecordError: a paused run's request id is not text (a BLOB written
                into the table by other code).
        """
        return self._run(_statements.pending_runs())

    def claim_paused(self, request_id: str, /, *, token: str | None = None) -> PausedRun | None:
        """The run paused under ``request_id``, for one caller only; ``None`` once claimed.

        Two requests that bring the user's answers at once (a double click,
        two hosts) must not both resume the run, or an approved write would
        run twice: the claim is one conditional update, and only the caller
        whose update took the row gets the paused run. A run saved more than
        once under ``request_id`` (a save sent again, two hosts that saved it)
        is handed out once too: a claim takes every save not claimed yet, and
        gives the latest. Claiming marks it
        taken even if the resume then fails: save the new pause the resume
        returns, or save the paused run again to retry (a resume that ran
        some of its calls before failing is refused then: see
        :meth:`ModelGateway.resume <veridic.ModelGateway.resume>`).

        The paused run is handed out as it was saved. One saved without the time it
        paused (by a release that kept none, format 5 or earlier) is handed out undated,
        never dated by the row's ``time``: that is when it was saved, by the saving host's
        clock, not by the gateway's ``clock`` that measures the answers' age; it is later
        than the pause; and whoever writes the table writes it, uncovered by any digest.
        An application that trusts it dates the run itself,
        ``dataclasses.replace(paused, paused_at=...)``, in the process that resumes it.

        A claim leaves the SHA-256 of a token in the rows it takes (never the token: whoever
        reads the database cannot bring it again), and a claim that brings the same token
        again gets the same run back (taking nothing saved since); any other claim gets
        ``None``. So a claim whose answer was lost is safe to send again: the store does so
        itself after a dropped connection (with a token of its own, made for the call),
        and a caller whose answer was lost above the store (a handler cancelled while the
        claim ran, a client that retries a request whose response it never got) passes
        ``token``: new for each attempt to claim (``secrets.token_hex(16)``, or the
        idempotency key the client sends again with its retry), and brought again only by
        that attempt's retry. Two claims that bring one token both get the run: never
        derive it from the request id or the run, and never take it from the page that
        asked the user (a hidden field of the form), which a double click posts twice.
        A resume of a run it already resumed
        is refused for the calls that ran (see :meth:`ModelGateway.resume
        <veridic.ModelGateway.resume>`).

        Raises:
            AuditRecordError: ``request_id`` or ``token`` is empty or holds a NUL or a
                lone surrogate (:meth:`save_paused` refuses such a run), or the row
                claimed holds the paused run of another request, or no paused run
                this veridic reads (edited, or restored from elsewhere: the message
                says why, as :meth:`PausedRun.from_json` does; the request's saves
                stay claimed).
        """
        return self._run(_statements.claim_paused(repr(self), request_id, token))


class AsyncSQLStore:
    """The coroutine twin of every :class:`SQLStore` method, given :meth:`_arun`.

    Each ``a``-method answers as the method without the ``a`` does; none
    holds the event loop while the database works.
    """

    async def _arun(self, statement: Statement[T]) -> T:
        raise NotImplementedError

    async def awrite(self, record: AuditRecord, /) -> None:
        """As :meth:`SQLStore.write`."""
        await self._arun(_statements.write_record(self, record))

    async def awrite_model_call(self, record: ModelCallRecord, /) -> None:
        """As :meth:`SQLStore.write_model_call`."""
        await self._arun(_statements.write_model_call(repr(self), record))

    async def awrite_model_reply(self, record: ModelReplyRecord, /) -> None:
        """As :meth:`SQLStore.write_model_reply`."""
        await self._arun(_statements.write_model_reply(repr(self), record))

    async def awrite_vouch(self, record: VouchRecord, /) -> None:
        """As :meth:`SQLStore.write_vouch`."""
        await self._arun(_statements.write_vouch(repr(self), record))

    async def arecords(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[AuditRecord, ...]:
        """As :meth:`SQLStore.records`."""
        return await self._arun(_statements.records(request_id, since, until))

    async def amodel_calls(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelCallRecord, ...]:
        """As :meth:`SQLStore.model_calls`."""
        return await self._arun(_statements.model_calls(request_id, since, until))

    async def amodel_replies(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[ModelReplyRecord, ...]:
        """As :meth:`SQLStore.model_replies`."""
        return await self._arun(_statements.model_replies(request_id, since, until))

    async def avouches(
        self,
        policy: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[VouchRecord, ...]:
        """As :meth:`SQLStore.vouches`."""
        return await self._arun(_statements.vouches(policy, since, until))

    async def acount(self) -> int:
        """As :meth:`SQLStore.count`."""
        return await self._arun(_statements.count())

    async def awrites_by_approval(self) -> dict[ApprovalMode, int]:
        """As :meth:`SQLStore.writes_by_approval`."""
        return await self._arun(_statements.writes_by_approval())

    async def ainstruction_writes_under_always_rule(self) -> tuple[AuditRecord, ...]:
        """As :meth:`SQLStore.instruction_writes_under_always_rule`."""
        return await self._arun(_statements.instruction_writes_under_always_rule())

    async def asubstitutions(
        self,
        request_id: str | None = None,
        *,
        since: float | None = None,
        until: float | None = None,
    ) -> tuple[Substitution, ...]:
        """As :meth:`SQLStore.substitutions`."""
        return await self._arun(_statements.substitutions(request_id, since, until))

    async def asubstitution_rate(self) -> float | None:
        """As :meth:`SQLStore.substitution_rate`."""
        return _statements.substitution_rate(await self.asubstitutions())

    async def asave_conversation(
        self, key: str, conversation: Conversation, /, *, time: float | None = None
    ) -> None:
        """As :meth:`SQLStore.save_conversation`."""
        await self._arun(_statements.save_conversation(repr(self), key, conversation, time))

    async def aconversation(self, key: str, /) -> Conversation | None:
        """As :meth:`SQLStore.conversation`."""
        return await self._arun(_statements.conversation(repr(self), key))

    async def asave_rules(self, scope: str, rules: Mapping[str, str], /) -> None:
        """As :meth:`SQLStore.save_rules`."""
        await self._arun(_statements.save_rules(repr(self), scope, rules))

    async def arules(self, scope: str, /) -> dict[str, str]:
        """As :meth:`SQLStore.rules`."""
        return await self._arun(_statements.rules(scope))

    async def asave_paused(self, paused: PausedRun, /) -> None:
        """As :meth:`SQLStore.save_paused`."""
        await self._arun(_statements.save_paused(repr(self), paused))

    async def apending_runs(self) -> tuple[str, ...]:
        """As :meth:`SQLStore.pending_runs`."""
        return await self._arun(_statements.pending_runs())

    async def aclaim_paused(
        self, request_id: str, /, *, token: str | None = None
    ) -> PausedRun | None:
        """As :meth:`SQLStore.claim_paused`. A task cancelled while the claim runs may
        leave it committed and its answer unread: claim again with the same ``token``
        (one made without ``token`` cannot be brought again: its run may be nobody's)."""
        return await self._arun(_statements.claim_paused(repr(self), request_id, token))
