"""Reproducers of a second read of the text core, the templates and the mypy plugin.

The changes under review read labels and texts "as the characters they hold", found
blocks in one pass, and refused a pydantic field typed ``TrustedInstruction``. Each test
here failed on the merged code before its fix.
"""

from __future__ import annotations

import sys
import tracemalloc

import pytest

from veridic import Composer, instruction, untrusted
from veridic.fence import DATA_MODES, DataMode

# --- the fence's hot path copies no document it only reads ----------------------------------


@pytest.mark.parametrize("mode", DATA_MODES)
def test_a_block_of_a_large_untrusted_document_costs_no_extra_copy(mode: DataMode) -> None:
    # block_parts() read every text "as the characters it holds" by copying it, the
    # UntrustedText the composer places too: a 10 MB document's block held one more
    # copy of it at its peak (benchmarks/sizes.py: 8.1x to 10.0x the document).
    document = untrusted("Ünïcode line ☃ with <tags> and [brackets]\n" * 25_000, source="doc")
    size = sys.getsizeof(document)
    composer = Composer(data_mode=mode).system(instruction("Be brief."))
    tracemalloc.start()
    try:
        composer.data("doc", document)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # What the mode writes: datamark and encode a rendering and the message, verbatim
    # the message and the content's brand; a copy of the document more fails.
    assert peak < {"datamark": 4.8, "encode": 3.2, "verbatim": 2.5}[mode] * size
