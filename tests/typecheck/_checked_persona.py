"""A function that mints its text, imported by checking_only.py under TYPE_CHECKING."""

from veridic import TrustedInstruction, instruction


def persona() -> TrustedInstruction:
    return instruction("You are the billing assistant.")


class Persona:
    def rules(self) -> TrustedInstruction:
        return instruction("Answer in French.")


BANNER: TrustedInstruction = instruction("Billing assistant.")
