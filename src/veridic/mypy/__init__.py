"""The ``veridic.mypy`` plugin: mypy rejects untrusted text in instruction positions.

Enable it in the mypy configuration::

    [mypy]
    plugins = veridic.mypy

mypy alone cannot enforce veridic's rules: it reads ``LiteralString`` as
``str`` (python/mypy#12554), a NewType's constructor accepts any ``str``, and
every ``str`` operation returns ``str``. The plugin closes those gaps so that
the static check and the run-time check of invariant I1 agree. Each rule lives
in one small module, whose docstring says which hook it uses and why:

=====================  ==========================================  ===================
module                 rule                                        error code
=====================  ==========================================  ===================
``_literal_string``    keeps ``LiteralString`` annotations visible  (none)
``_minting``           ``instruction()`` / ``LiteralString`` args    ``veridic-literal``
                       are text written in code
``_forging``           no brand constructor outside veridic         ``veridic-forge``
``_composition``       trusted ``+`` trusted is trusted             (none: a type)
``_any_guard``         no ``Any`` in an instruction position        ``veridic-any``
``_policy``            ``TrustPolicy`` names are literal and listed  ``veridic-policy``
``_sdk``               provider SDK calls give instructions only    ``veridic-sdk``
                       in trusted text
=====================  ==========================================  ===================

The error codes are declared in :mod:`veridic.mypy.errorcodes`; docs/mypy.md
says what mypy cannot see (``typing.cast`` to a brand) and what pyright checks
without a plugin.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final

from mypy.checker import TypeChecker
from mypy.options import Options
from mypy.plugin import (
    AnalyzeTypeContext,
    FunctionContext,
    MethodContext,
    Plugin,
    ReportConfigContext,
)
from mypy.types import Type

# errorcodes is imported here, with the plugin, so that mypy knows the codes before it
# validates disable_error_code and the like.
from veridic.mypy import _names, errorcodes

if TYPE_CHECKING:
    from veridic.mypy._config import PolicySettings
    from veridic.mypy._signature import Callee

__all__ = ["VeridicPlugin", "errorcodes", "plugin"]

_SKIPPED_PREFIX: Final = "builtins."
"""Built-ins have no ``LiteralString`` or instruction parameters worth a look-up."""

_INSTALLED: Final = ("site-packages", "dist-packages")


class VeridicPlugin(Plugin):
    """Routes mypy's hooks to the rule modules by the full name of what is called.

    The rule modules are imported when a hook first needs them: a warm run, where
    every module comes from mypy's cache, calls no hook and pays only for this one.
    """

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._digest = _source_digest()
        self._settings: PolicySettings | None = None

    @property
    def policies(self) -> PolicySettings:
        """The ``[tool.veridic] trust-policies`` settings, read on first use."""
        if self._settings is None:
            from veridic.mypy import _config

            self._settings = _config.read(self.options)
        return self._settings

    def report_config_data(self, ctx: ReportConfigContext) -> object:
        # mypy stores this with each module and re-checks the module when it changes: a
        # new plugin re-checks everything, a new trust-policies list only the modules
        # that mention TrustPolicy (the others cannot get a veridic-policy error).
        # veridic's own modules and installed packages name no policies of the project.
        if (
            ctx.path.endswith(".py")
            and not _names.in_package(ctx.id)
            and not any(part in ctx.path for part in _INSTALLED)
            and _mentions_policy(ctx.path)
        ):
            settings = self.policies
            names = None if settings.names is None else sorted(settings.names)
            return {
                "plugin": self._digest,
                "trust-policies": names,
                "source": settings.source,
                "problem": settings.problem,
            }
        return self._digest

    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        if fullname in _names.LITERAL_STRING:
            from veridic.mypy import _literal_string

            return partial(_literal_string.analyze, self, fullname)
        return None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        if fullname in _names.BRANDS:
            from veridic.mypy import _forging

            return partial(_forging.check, fullname)
        if fullname == _names.TRUST_POLICY:
            from veridic.mypy import _policy

            return partial(_policy.check, self.policies)
        return self._call_hook(fullname)

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if fullname == _names.TRUSTED_ADD:
            from veridic.mypy import _composition

            return _composition.check
        from veridic.mypy import _sdk

        sdk = _sdk.hook(fullname)
        if sdk is not None:
            return sdk
        return self._call_hook(fullname)

    def _call_hook(self, fullname: str) -> Callable[[FunctionContext | MethodContext], Type] | None:
        if fullname.startswith(_SKIPPED_PREFIX):
            return None
        from veridic.mypy import _signature

        callee = _signature.find(self, fullname)
        return None if callee is None else partial(_check_call, callee)


def _check_call(callee: Callee, ctx: FunctionContext | MethodContext) -> Type:
    from veridic.mypy import _any_guard, _minting

    if isinstance(ctx.api, TypeChecker):
        _minting.check(ctx, callee, ctx.api)
        _any_guard.check(ctx, callee, ctx.api)
    return ctx.default_return_type


def _mentions_policy(path: str) -> bool:
    try:
        return b"TrustPolicy" in Path(path).read_bytes()
    except OSError:
        return True


def _source_digest() -> str:
    """A digest of the plugin's own files: mypy hashes only the module it imports."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: ``plugins = veridic.mypy`` calls this with mypy's version."""
    return VeridicPlugin
