"""veridic: typed prompt assembly with provenance types.

Only trusted text gives instructions; untrusted text is fenced data; every
span of a prompt can say where it came from. See the README for the rules.
"""

from veridic.compose import Composer
from veridic.config import configure
from veridic.errors import (
    AlwaysAllowRefused,
    ProvenanceError,
    RiskFloorError,
    ToolDeniedError,
    ToolUnavailableError,
    UnknownToolError,
    VeridicError,
)
from veridic.fence import unfence
from veridic.fields import InstructionField, instruction_fields
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
from veridic.trust_policy import TrustPolicy

__all__ = [
    "AlwaysAllowRefused",
    "Composer",
    "InstructionField",
    "Prompt",
    "Provenance",
    "ProvenanceError",
    "RiskFloorError",
    "Span",
    "ToolDeniedError",
    "ToolUnavailableError",
    "TrustPolicy",
    "TrustedInstruction",
    "UnknownToolError",
    "UntrustedText",
    "VeridicError",
    "configure",
    "instruction",
    "instruction_fields",
    "is_trusted",
    "join",
    "provenance",
    "unfence",
    "untrusted",
]
