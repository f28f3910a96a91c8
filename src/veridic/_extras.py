"""Optional dependencies, imported when first used: provider SDKs and integration libraries."""

from __future__ import annotations

import importlib
from types import ModuleType

from veridic.errors import MissingExtraError

__all__ = ["require"]


def require(module: str, extra: str, needed_by: str) -> ModuleType:
    """Import ``module``, or say which extra of veridic installs it.

    Raises:
        MissingExtraError: the module is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"{needed_by} needs the {module!r} package, which is not installed ({error}): "
            f"pip install 'veridic[{extra}]'"
        ) from error
