"""TrustPolicy names are literals listed in [tool.veridic] trust-policies (veridic-policy).

The runner configures trust-policies = ["legacy-prompts", "admin-prompts"].
"""

from typing import Final, Literal, LiteralString

from _constants import POLICY_NAME

from veridic import TrustPolicy

ADMIN: Final = "admin-prompts"


def policies(name: str, which: Literal["legacy-prompts", "admin-prompts"]) -> None:
    TrustPolicy("legacy-prompts")
    TrustPolicy(ADMIN)
    TrustPolicy(POLICY_NAME)
    TrustPolicy(which)
    TrustPolicy("admin-" + "prompts")
    TrustPolicy("new-door")  # E: [veridic-policy] trust policy "new-door" is not in
    # P: [reportArgumentType]
    TrustPolicy(name)  # E: [veridic-policy] must be a string literal
    TrustPolicy("")  # E: [veridic-policy] needs a non-empty name


def passed_on(name: LiteralString) -> TrustPolicy:
    return TrustPolicy(name)  # E: [veridic-policy] got the LiteralString parameter "name"


def either(flag: bool) -> TrustPolicy:
    return TrustPolicy("legacy-prompts" if flag else "other")  # E: [veridic-policy] "other"
