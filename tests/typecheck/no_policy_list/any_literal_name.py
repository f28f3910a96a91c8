"""Without a trust-policies list, any literal name is accepted; a variable is still refused.

The runner checks this directory with a pyproject.toml that has no [tool.veridic] list.
"""

from veridic import TrustPolicy


def policies(name: str) -> None:
    TrustPolicy("any-door-at-all")
    # P: [reportArgumentType]
    TrustPolicy(name)  # E: [veridic-policy] must be a string literal
