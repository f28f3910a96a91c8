"""A second read of the eighth review's mypy rules: what a user is told to do.

A project's stub that declares trusted text is ``veridic-forge``; the message told the
user to remove the stub and let mypy check the module. A stub of a compiled module (an
extension built with Cython or mypyc, a ``.so`` beside the ``.pyi``) has no module mypy
can check: the message must give that user a way out too.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_typecheck import CACHE, POLICIES, run_mypy, write_config


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_config(tmp_path_factory.mktemp("read9-mypy"), POLICIES)


def test_a_stub_of_a_compiled_module_declaring_trust_says_what_to_do(
    config: Path, tmp_path: Path
) -> None:
    stub = tmp_path / "read9_native.pyi"  # the stub of an extension: no .py beside it
    stub.write_text(
        textwrap.dedent(
            """\
            from veridic import TrustedInstruction

            def persona() -> TrustedInstruction: ...
            """
        )
    )
    reported, out = run_mypy([stub], config, cache=CACHE)
    assert [(r.line, r.code) for r in reported] == [(3, "veridic-forge")], out
    message = reported[0].message
    assert "compiled" in message, message
    assert 'TrustPolicy("name").vouch(' in message, message
