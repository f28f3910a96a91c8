"""InstructionField checks hold with and without the pydantic.mypy plugin, typed or not.

tests/typecheck/instruction_fields.py is checked by tests/test_typecheck.py without the
pydantic.mypy plugin (mypy reads a model's constructor through pydantic's
``dataclass_transform``). Here the same file, with the same marks, goes through mypy with
``plugins = pydantic.mypy, veridic.mypy``, once with pydantic's default
``init_typed = False`` (the constructor takes ``Any``) and once with ``init_typed = True``.
A last test checks the models and bases of a module that mypy read back from its cache.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Final

import pytest
from test_typecheck import (
    CACHE,
    CASES,
    POLICIES,
    assert_matches,
    assert_notes,
    run_mypy,
    write_config,
)

FIELDS: Final = CASES / "instruction_fields.py"


def _with_pydantic(directory: Path, *, init_typed: bool) -> Path:
    config = write_config(directory, POLICIES)
    text = config.read_text().replace(
        "plugins = veridic.mypy\n", "plugins = pydantic.mypy, veridic.mypy\n"
    )
    config.write_text(
        text + f"\n[pydantic-mypy]\ninit_typed = {init_typed}\ninit_forbid_extra = False\n"
    )
    return config


@pytest.mark.parametrize("init_typed", [False, True], ids=["init_typed_off", "init_typed_on"])
def test_instruction_fields_are_checked_with_the_pydantic_plugin(
    init_typed: bool, tmp_path: Path
) -> None:
    config = _with_pydantic(tmp_path, init_typed=init_typed)
    # A cache of the configuration's own: pydantic's plugin changes every model's signature.
    cache = CACHE.with_name(f"{CACHE.name}-pydantic-{'typed' if init_typed else 'untyped'}")
    reported, out = run_mypy([FIELDS], config, cache=cache)
    assert_matches(FIELDS, reported)
    assert_notes(FIELDS, out)


def test_models_and_bases_read_back_from_the_cache_are_still_checked(tmp_path: Path) -> None:
    # A first run caches a module with a model and a base class. A new module is then
    # checked against those cached definitions: the InstructionField mark of the model's
    # field, and the base's plain str parameter, must survive mypy's cache.
    config = write_config(tmp_path / "config", POLICIES)
    cache = tmp_path / "cache"
    support = tmp_path / "cached_definitions.py"
    support.write_text(
        "from typing import LiteralString\n"
        "from pydantic import BaseModel\n"
        "from veridic import InstructionField, TrustedInstruction, instruction\n"
        "\n"
        "\n"
        "class StoredPrompt(BaseModel):\n"
        "    content: InstructionField\n"
        "\n"
        "\n"
        "class Base:\n"
        "    def say(self, text: str) -> TrustedInstruction:\n"
        '        return instruction("base")\n'
    )
    run_mypy([support], config, cache=cache)
    caller = tmp_path / "cached_caller.py"
    caller.write_text(
        f"# run {uuid.uuid4()}\n"
        "from typing import LiteralString\n"
        "from cached_definitions import Base, StoredPrompt\n"
        "from veridic import TrustedInstruction, UntrustedText, instruction\n"
        "\n"
        "\n"
        "class Override(Base):\n"
        "    def say(self, text: LiteralString) -> TrustedInstruction:\n"
        "        return instruction(text)  # E: [veridic-literal] Base.say()\n"
        "\n"
        "\n"
        "def use(name: str, u: UntrustedText) -> None:\n"
        "    StoredPrompt(content=name)\n"
        '    StoredPrompt(content=u)  # E: [veridic-launder] for "content"\n'
    )
    log: list[str] = []
    reported, _ = run_mypy([caller, support], config, log=log, cache=cache)
    assert any("Metadata fresh for cached_definitions" in line for line in log)
    assert_matches(caller, reported)


@pytest.mark.parametrize(
    "plugins", ["veridic.mypy, pydantic.mypy", "veridic.mypy:plugin, pydantic.mypy"]
)
def test_a_plugin_listed_after_veridics_stops_mypy_with_the_order_to_write(
    plugins: str, tmp_path: Path
) -> None:
    """veridic's plugin hooks every call, so mypy would never ask a plugin listed after
    it: pydantic's or django-stubs' checks were lost without a word."""
    config = write_config(tmp_path, POLICIES)
    config.write_text(
        config.read_text().replace("plugins = veridic.mypy\n", f"plugins = {plugins}\n")
    )
    checked = tmp_path / "checked.py"
    checked.write_text("x: int = 1\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--no-incremental",
            str(checked),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "veridic.mypy plugin is listed before pydantic.mypy" in done.stderr
    assert (
        "list veridic.mypy last (for example plugins = pydantic.mypy, veridic.mypy)" in done.stderr
    )
