"""Support module (not a case): constants that other cases import."""

from typing import Final

GREETING: Final = "You are a support assistant."
DECLARED: Final[str] = "Answer in English."
POLICY_NAME: Final = "legacy-prompts"
NOT_LITERAL: Final = GREETING.upper()
