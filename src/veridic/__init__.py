"""veridic: typed prompt assembly with provenance types.

Only trusted text gives instructions; untrusted text is fenced data; every
span of a prompt can say where it came from. See the README for the rules.
"""

from veridic.approval import ApprovalMode, ApprovalPolicy, ApprovalRequest
from veridic.audit import AuditRecord, AuditSink, CallOutcome, SQLiteAuditSink
from veridic.compose import Composer
from veridic.config import configure
from veridic.doc_gaps import DocGap, GapCode, find_doc_gaps
from veridic.errors import (
    AlwaysAllowRefused,
    ApprovalDeniedError,
    AuditRecordError,
    GuardDeniedError,
    IncompletePlanError,
    InvalidArgumentsError,
    MissingExtraError,
    PlanError,
    ProvenanceError,
    RiskFloorError,
    ToolCouplingError,
    ToolDeniedError,
    ToolUnavailableError,
    UnknownToolError,
    VeridicError,
)
from veridic.executor import CallResult, aexecute, execute
from veridic.fence import unfence
from veridic.fields import InstructionField, instruction_fields
from veridic.gateway import ModelCallRecord, ModelGateway, Reply, ToolOutcome
from veridic.guards import guard_instruction_write, guard_irreversible
from veridic.plan import NormalizedPlan, PlanStep, normalize_plan
from veridic.prompt import Prompt
from veridic.provenance import (
    Provenance,
    Span,
    TrustedInstruction,
    UntrustedText,
    instruction,
    is_trusted,
    join,
    provenance,
    untrusted,
)
from veridic.providers import AnthropicMessages, OpenAIChat, OpenAIResponses, ScriptedProvider
from veridic.registry import Component, Registry
from veridic.risk import Risk
from veridic.templates import DataTemplate, InstructionTemplate, Templates
from veridic.tool import Tool
from veridic.trust_policy import TrustPolicy
from veridic.view import Deny, PreparedCall, ToolStatus, ToolView

__all__ = [
    "AlwaysAllowRefused",
    "AnthropicMessages",
    "ApprovalDeniedError",
    "ApprovalMode",
    "ApprovalPolicy",
    "ApprovalRequest",
    "AuditRecord",
    "AuditRecordError",
    "AuditSink",
    "CallOutcome",
    "CallResult",
    "Component",
    "Composer",
    "DataTemplate",
    "Deny",
    "DocGap",
    "GapCode",
    "GuardDeniedError",
    "IncompletePlanError",
    "InstructionField",
    "InstructionTemplate",
    "InvalidArgumentsError",
    "MissingExtraError",
    "ModelCallRecord",
    "ModelGateway",
    "NormalizedPlan",
    "OpenAIChat",
    "OpenAIResponses",
    "PlanError",
    "PlanStep",
    "PreparedCall",
    "Prompt",
    "Provenance",
    "ProvenanceError",
    "Registry",
    "Reply",
    "Risk",
    "RiskFloorError",
    "SQLiteAuditSink",
    "ScriptedProvider",
    "Span",
    "Templates",
    "Tool",
    "ToolCouplingError",
    "ToolDeniedError",
    "ToolOutcome",
    "ToolStatus",
    "ToolUnavailableError",
    "ToolView",
    "TrustPolicy",
    "TrustedInstruction",
    "UnknownToolError",
    "UntrustedText",
    "VeridicError",
    "aexecute",
    "configure",
    "execute",
    "find_doc_gaps",
    "guard_instruction_write",
    "guard_irreversible",
    "instruction",
    "instruction_fields",
    "is_trusted",
    "join",
    "normalize_plan",
    "provenance",
    "unfence",
    "untrusted",
]
