"""``[tool.veridic]`` as the commands read it.

Read once, before the command imports the application, so that a bad key is a
usage error naming the file, and ``trust-policies`` is in force when the
application's code runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from veridic.checks._cli_report import _UsageError
from veridic.checks.lint import DEFAULT_THRESHOLD
from veridic.config import ToolConfig, configure, find_pyproject, read_tool_config
from veridic.errors import VeridicError


@dataclass(frozen=True, slots=True)
class _Config:
    """``[tool.veridic]`` as the commands use it, validated by ``config.read_tool_config``."""

    path: Path | None = None
    trust_policies: frozenset[str] | None = None
    similarity_threshold: float = DEFAULT_THRESHOLD
    siblings: tuple[frozenset[str], ...] = ()
    manifest: Path | None = None

    @classmethod
    def of(cls, read: ToolConfig) -> _Config:
        threshold = read.similarity_threshold
        return cls(
            path=read.path,
            trust_policies=read.trust_policies,
            similarity_threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
            siblings=read.siblings,
            manifest=read.manifest,
        )


def _load_config(path: Path | None) -> _Config:
    """Read and validate ``[tool.veridic]``; also applies ``trust-policies`` to this process.

    Raises:
        _UsageError: the file is missing or unreadable, a key is unknown, or a
            value has the wrong type (:func:`veridic.config.read_tool_config`);
            the table is misspelt (``[tool.veridc]``); or ``--config`` names a
            file without a ``[tool.veridic]`` table, whose settings the user
            believes apply.
    """
    if path is not None and not path.is_file():
        what = "is a folder" if path.is_dir() else "no such file"
        raise _UsageError(
            f"--config {path}: {what}: pass the pyproject.toml that holds [tool.veridic]"
        )
    found = path if path is not None else find_pyproject(Path.cwd())
    if found is None:
        return _Config()
    try:
        read = read_tool_config(found)
        config = _Config.of(read)
        if path is not None and not read.table:
            raise VeridicError(
                f"--config {path} has no [tool.veridic] table, so no setting of it would "
                "apply (no trust-policies check, no manifest): pass the pyproject.toml that "
                "holds [tool.veridic], or add the table to this file"
            )
        if config.trust_policies is not None:
            # configure() reads the working directory's pyproject.toml on first use, which
            # may be another file than --config: a malformed one is a usage error too.
            configure(trust_policies=config.trust_policies)
    except VeridicError as error:
        raise _UsageError(str(error)) from error
    return config
