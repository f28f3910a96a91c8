"""A `# type: ignore[code]` silences one line (and `veridic hatches` lists it)."""

from veridic import TrustedInstruction, instruction


def ignored(name: str) -> list[str]:
    return [
        TrustedInstruction(name),  # type: ignore[veridic-forge]
        instruction(name),  # type: ignore[veridic-literal]
        instruction(name),  # type: ignore[veridic-forge]  # E: [veridic-literal] # E: [unused-ignore]
    ]
