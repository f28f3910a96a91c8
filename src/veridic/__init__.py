"""veridic: typed prompt assembly with provenance types.

Only trusted text gives instructions; untrusted text is fenced data; every
span of a prompt can say where it came from. See the README for the rules.

The names below load on first use, so ``import veridic`` (and the mypy
plugin, which lives in this package) costs almost nothing until a name is
touched; type checkers see ordinary imports.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Final

# The brands load eagerly: they are light (no dependency beyond the standard
# library), and the function ``provenance`` must win over the module of the
# same name. Its old path ``veridic.provenance`` is an alias (``veridic._moved``)
# registered here, before anything can import it: importing the alias file would
# make the import system bind the module here, over the function.
from veridic.text import provenance as _provenance_module
from veridic.text.provenance import (
    Provenance,
    Span,
    TrustedInstruction,
    TrustedText,
    UntrustedText,
    instruction,
    is_trusted,
    join,
    provenance,
    untrusted,
)

sys.modules.setdefault("veridic.provenance", _provenance_module)

if TYPE_CHECKING:
    from veridic.checks.doc_gaps import (
        DocGap,
        GapCode,
        find_doc_gaps,
    )
    from veridic.config import (
        configure,
        configured,
    )
    from veridic.errors import (
        AlwaysAllowRefused,
        AlwaysAllowRefusedError,
        ApprovalDeniedError,
        ApprovalExpiredError,
        AuditRecordError,
        AuditWriteError,
        GuardDeniedError,
        IncompletePlanError,
        InvalidArgumentsError,
        MissingExtraError,
        PlanError,
        ProvenanceError,
        RiskFloorError,
        RiskViolation,
        RunLimitError,
        TemplateError,
        TemplateParamsError,
        TemplateSandboxError,
        ToolCouplingError,
        ToolDeniedError,
        ToolError,
        ToolUnavailableError,
        UnknownToolError,
        VeridicError,
        VouchNotRecordedError,
    )
    from veridic.providers import (
        AnthropicMessages,
        OpenAIChat,
        OpenAIResponses,
        ScriptedProvider,
        Usage,
    )
    from veridic.run.approval import (
        ApprovalMode,
        ApprovalPolicy,
        ApprovalRequest,
        SkippedRule,
    )
    from veridic.run.audit import (
        AsyncAuditSink,
        AsyncAuditStore,
        AuditRecord,
        AuditSink,
        AuditStore,
        CallOutcome,
        SQLiteAuditSink,
    )
    from veridic.run.deferred import (
        PausedRun,
        PendingApproval,
    )
    from veridic.run.executor import (
        CallResult,
        aexecute,
        execute,
    )
    from veridic.run.gateway import (
        ModelCallRecord,
        ModelGateway,
        ModelReplyRecord,
    )
    from veridic.run.limits import (
        Limits,
    )
    from veridic.run.postgres import (
        AsyncPostgresAuditSink,
        PostgresAuditSink,
    )
    from veridic.run.reply import (
        Reply,
        ToolOutcome,
    )
    from veridic.run.run_loop import (
        RunResult,
    )
    from veridic.run.telemetry import (
        instrument,
        instrumented,
        is_instrumented,
        uninstrument,
    )
    from veridic.templates import (
        DataTemplate,
        InstructionTemplate,
        Templates,
    )
    from veridic.text.compose import (
        Composer,
    )
    from veridic.text.conversation import (
        Conversation,
    )
    from veridic.text.document import (
        PromptDocument,
    )
    from veridic.text.fence import (
        unfence,
    )
    from veridic.text.fields import (
        InstructionField,
        instruction_fields,
    )
    from veridic.text.prompt import (
        Prompt,
    )
    from veridic.text.reasoning import (
        ReasoningItem,
    )
    from veridic.text.trust_policy import (
        TrustPolicy,
        VouchRecord,
        VouchSink,
    )
    from veridic.tools.boot_failure import (
        BootError,
    )
    from veridic.tools.component import (
        Component,
    )
    from veridic.tools.context import (
        ToolContext,
    )
    from veridic.tools.filters import (
        Deny,
    )
    from veridic.tools.guards import (
        guard_instruction_write,
        guard_irreversible,
    )
    from veridic.tools.plan import (
        NormalizedPlan,
        PlanStep,
        normalize_plan,
    )
    from veridic.tools.registry import (
        Registry,
    )
    from veridic.tools.risk import (
        Risk,
    )
    from veridic.tools.status import (
        ToolStatus,
    )
    from veridic.tools.tool import (
        Tool,
        ToolHints,
    )
    from veridic.tools.view import (
        PreparedCall,
        ToolView,
    )
    from veridic.tools.wording import (
        CapabilityWording,
    )

__version__: Final = "0.1.0"
"""The installed release (also the package metadata's version: pyproject reads it here)."""

_HOMES: dict[str, str] = {
    "AlwaysAllowRefused": "veridic.errors",
    "AlwaysAllowRefusedError": "veridic.errors",
    "AnthropicMessages": "veridic.providers",
    "ApprovalDeniedError": "veridic.errors",
    "ApprovalExpiredError": "veridic.errors",
    "ApprovalMode": "veridic.run.approval",
    "ApprovalPolicy": "veridic.run.approval",
    "ApprovalRequest": "veridic.run.approval",
    "AuditRecord": "veridic.run.audit",
    "AuditRecordError": "veridic.errors",
    "AuditWriteError": "veridic.errors",
    "AuditSink": "veridic.run.audit",
    "AuditStore": "veridic.run.audit",
    "AsyncAuditSink": "veridic.run.audit",
    "AsyncAuditStore": "veridic.run.audit",
    "BootError": "veridic.tools.boot_failure",
    "CallOutcome": "veridic.run.audit",
    "CallResult": "veridic.run.executor",
    "CapabilityWording": "veridic.tools.wording",
    "Component": "veridic.tools.component",
    "Composer": "veridic.text.compose",
    "PausedRun": "veridic.run.deferred",
    "PendingApproval": "veridic.run.deferred",
    "SkippedRule": "veridic.run.approval",
    "Conversation": "veridic.text.conversation",
    "DataTemplate": "veridic.templates",
    "Deny": "veridic.tools.filters",
    "DocGap": "veridic.checks.doc_gaps",
    "GapCode": "veridic.checks.doc_gaps",
    "GuardDeniedError": "veridic.errors",
    "IncompletePlanError": "veridic.errors",
    "InstructionField": "veridic.text.fields",
    "InstructionTemplate": "veridic.templates",
    "InvalidArgumentsError": "veridic.errors",
    "MissingExtraError": "veridic.errors",
    "ModelCallRecord": "veridic.run.gateway",
    "ModelReplyRecord": "veridic.run.gateway",
    "Limits": "veridic.run.limits",
    "ModelGateway": "veridic.run.gateway",
    "NormalizedPlan": "veridic.tools.plan",
    "OpenAIChat": "veridic.providers",
    "OpenAIResponses": "veridic.providers",
    "PlanError": "veridic.errors",
    "PlanStep": "veridic.tools.plan",
    "PreparedCall": "veridic.tools.view",
    "Prompt": "veridic.text.prompt",
    "ProvenanceError": "veridic.errors",
    "ReasoningItem": "veridic.text.reasoning",
    "Registry": "veridic.tools.registry",
    "Reply": "veridic.run.reply",
    "RunLimitError": "veridic.errors",
    "RunResult": "veridic.run.run_loop",
    "Risk": "veridic.tools.risk",
    "RiskFloorError": "veridic.errors",
    "RiskViolation": "veridic.errors",
    "TemplateError": "veridic.errors",
    "TemplateParamsError": "veridic.errors",
    "TemplateSandboxError": "veridic.errors",
    "SQLiteAuditSink": "veridic.run.audit",
    "ScriptedProvider": "veridic.providers",
    "Templates": "veridic.templates",
    "Tool": "veridic.tools.tool",
    "ToolHints": "veridic.tools.tool",
    "ToolContext": "veridic.tools.context",
    "ToolCouplingError": "veridic.errors",
    "ToolDeniedError": "veridic.errors",
    "ToolError": "veridic.errors",
    "ToolOutcome": "veridic.run.reply",
    "ToolStatus": "veridic.tools.status",
    "ToolUnavailableError": "veridic.errors",
    "ToolView": "veridic.tools.view",
    "TrustPolicy": "veridic.text.trust_policy",
    "UnknownToolError": "veridic.errors",
    "Usage": "veridic.providers",
    "VeridicError": "veridic.errors",
    "VouchNotRecordedError": "veridic.errors",
    "VouchRecord": "veridic.text.trust_policy",
    "VouchSink": "veridic.text.trust_policy",
    "PostgresAuditSink": "veridic.run.postgres",
    "PromptDocument": "veridic.text.document",
    "AsyncPostgresAuditSink": "veridic.run.postgres",
    "aexecute": "veridic.run.executor",
    "configure": "veridic.config",
    "configured": "veridic.config",
    "execute": "veridic.run.executor",
    "find_doc_gaps": "veridic.checks.doc_gaps",
    "guard_instruction_write": "veridic.tools.guards",
    "guard_irreversible": "veridic.tools.guards",
    "instrument": "veridic.run.telemetry",
    "instrumented": "veridic.run.telemetry",
    "is_instrumented": "veridic.run.telemetry",
    "uninstrument": "veridic.run.telemetry",
    "instruction_fields": "veridic.text.fields",
    "normalize_plan": "veridic.tools.plan",
    "unfence": "veridic.text.fence",
}

__all__ = [
    "AlwaysAllowRefused",
    "AlwaysAllowRefusedError",
    "AnthropicMessages",
    "ApprovalDeniedError",
    "ApprovalExpiredError",
    "ApprovalMode",
    "ApprovalPolicy",
    "ApprovalRequest",
    "AsyncAuditSink",
    "AsyncAuditStore",
    "AsyncPostgresAuditSink",
    "AuditRecord",
    "AuditRecordError",
    "AuditSink",
    "AuditStore",
    "AuditWriteError",
    "BootError",
    "CallOutcome",
    "CallResult",
    "CapabilityWording",
    "Component",
    "Composer",
    "Conversation",
    "DataTemplate",
    "Deny",
    "DocGap",
    "GapCode",
    "GuardDeniedError",
    "IncompletePlanError",
    "InstructionField",
    "InstructionTemplate",
    "InvalidArgumentsError",
    "Limits",
    "MissingExtraError",
    "ModelCallRecord",
    "ModelGateway",
    "ModelReplyRecord",
    "NormalizedPlan",
    "OpenAIChat",
    "OpenAIResponses",
    "PausedRun",
    "PendingApproval",
    "PlanError",
    "PlanStep",
    "PostgresAuditSink",
    "PreparedCall",
    "Prompt",
    "PromptDocument",
    "Provenance",
    "ProvenanceError",
    "ReasoningItem",
    "Registry",
    "Reply",
    "Risk",
    "RiskFloorError",
    "RiskViolation",
    "RunLimitError",
    "RunResult",
    "SQLiteAuditSink",
    "ScriptedProvider",
    "SkippedRule",
    "Span",
    "TemplateError",
    "TemplateParamsError",
    "TemplateSandboxError",
    "Templates",
    "Tool",
    "ToolContext",
    "ToolCouplingError",
    "ToolDeniedError",
    "ToolError",
    "ToolHints",
    "ToolOutcome",
    "ToolStatus",
    "ToolUnavailableError",
    "ToolView",
    "TrustPolicy",
    "TrustedInstruction",
    "TrustedText",
    "UnknownToolError",
    "UntrustedText",
    "Usage",
    "VeridicError",
    "VouchNotRecordedError",
    "VouchRecord",
    "VouchSink",
    "aexecute",
    "configure",
    "configured",
    "execute",
    "find_doc_gaps",
    "guard_instruction_write",
    "guard_irreversible",
    "instruction",
    "instruction_fields",
    "instrument",
    "instrumented",
    "is_instrumented",
    "is_trusted",
    "join",
    "normalize_plan",
    "provenance",
    "unfence",
    "uninstrument",
    "untrusted",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'veridic' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
