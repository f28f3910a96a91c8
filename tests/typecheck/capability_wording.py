"""CapabilityWording's fields are TrustedInstruction: text minted from a literal, not any str.

The wording frames the capability section, an instruction position, so a user writes
instruction("...") for each field; the constructor checks the same at run time.
"""

from veridic import (
    CapabilityWording,
    Registry,
    TrustedInstruction,
    UntrustedText,
    instruction,
)


def accepted(registry: Registry, minted: TrustedInstruction) -> None:
    wording = CapabilityWording(place=instruction("in Acme Desk"), intro=minted)
    Registry("desk", wording=wording, schema_tool=False)
    registry.view(wording=wording, schema_tool=True)
    registry.view(wording=None, schema_tool=None)


def refused(name: str, u: UntrustedText) -> None:
    # P: [reportArgumentType]
    # E: [arg-type] expected "TrustedInstruction"
    CapabilityWording(place="on our site")
    # P: [reportArgumentType]
    CapabilityWording(place=instruction(name))  # E: [veridic-literal] the parameter "name"
    # P: [reportArgumentType]
    # E: [arg-type] "UntrustedText"
    CapabilityWording(component_line=u)
    # P: [reportArgumentType]
    # E: [arg-type] expected "TrustedInstruction"
    CapabilityWording(intro=f"Tools for {name}")
