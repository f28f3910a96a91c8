"""The ``veridic.mypy`` plugin: mypy rejects untrusted text in instruction positions.

Enable it in the mypy configuration::

    [mypy]
    plugins = veridic.mypy

mypy alone cannot enforce veridic's rules: it reads ``LiteralString`` as
``str`` (python/mypy#12554), a NewType's constructor accepts any ``str``, and
every ``str`` operation returns ``str``. The plugin closes those gaps so that
the static check and the run-time check of invariant I1 agree. Each rule lives
in one small module, whose docstring says which hook it uses and why:

=====================  ============================================  ===================
module                 rule                                          error code
=====================  ============================================  ===================
``_literal_string``    keeps ``LiteralString`` annotations visible   (none)
``_minting``           ``instruction()`` / ``LiteralString`` args    ``veridic-literal``
                       are text written in code
``_forging``           no brand constructor outside veridic, nor     ``veridic-forge``
                       passed as a value, nor a ``cast()`` to one,
                       nor ``str.__new__()`` of a brand's class
``_composition``       trusted ``+`` trusted is trusted              (none: a type)
``_any_guard``         no ``Any`` in an instruction position, nor    ``veridic-any``
                       in a ``Literal`` parameter
``_any_declared``      no ``Any`` assigned to a target declared to   ``veridic-any``
                       hold a ``TrustedInstruction``
``_any_overrides``     no override declared ``Any`` over a base's    ``veridic-any``
                       trusted method, property or attribute
``_overload_returns``  an overload's implementation returns no       ``veridic-forge``
                       more than its overloads declare
``_stub_trust``        a stub of the project declares no trusted     ``veridic-forge``
                       text (mypy checks no implementation)
``_narrowed_attrs``    no attribute declared trusted over a base's   ``veridic-forge``
                       attribute that takes any ``str``
``_checking_only``     no trusted text declared under                ``veridic-forge``
                       ``TYPE_CHECKING`` without a body, nor bound
                       again where only the run time reads it
``_attribute_writes``  no ``setattr()`` (nor a write through an      ``veridic-forge``
                       object's ``vars()``) of other text into an
                       attribute declared trusted
``_covariant_writes``  no other text written through a covariant     ``veridic-forge``
                       view (``Box[str]``) into an attribute typed
                       by the type variable
``_item_writes``       no other text into a trusted item through a   ``veridic-forge``
                       ``TypedDict``'s ``__setitem__`` called by
                       its name, nor ``NamedTuple._make()``
``_policy``            ``TrustPolicy`` names are literal and listed  ``veridic-policy``
``_fields``            no ``UntrustedText`` into an                  ``veridic-launder``
                       ``InstructionField``
``_bare_fields``       no ``TrustedInstruction`` field in a          ``veridic-forge``
                       pydantic model (it stores a plain ``str``)
``_private``           veridic's private minting names stay inside   ``veridic-forge``
``_escapes``           a function trusting a ``LiteralString``       ``veridic-literal``
                       parameter is called by name, not passed on
``_unchecked``         a call of ``instruction()`` (or any function  ``veridic-literal``
                       trusting a parameter) in code mypy skipped
``_namespace``         a ``Final`` text constant is not rewritten    ``veridic-literal``
                       through its module's namespace (``exec``),
                       nor a variable declared trusted               ``veridic-forge``
``_unvalidated``       ``model_construct``/``model_copy`` fill a     ``veridic-literal``
                       ``Literal`` field only with code text,
                       and ``model_copy`` an ``InstructionField``    ``veridic-forge``
                       only with minted text
``_notes``             mypy's own brand errors say how to mint,      (notes)
                       and an ignore of one that keeps a ``str``     ``veridic-forge``
                       as trusted is reported
``_sdk``               provider SDK calls give instructions only     ``veridic-sdk``
                       in trusted text
=====================  ============================================  ===================

``_code_text`` decides what is text written in code, with ``_rebinding``
(names bound again), ``_overrides`` (parameters reached through a base's
``str``) and ``_literal_data`` (``Literal`` values filled from ``Any``).

The error codes are declared in :mod:`veridic.mypy.errorcodes`; docs/mypy.md
says what mypy cannot see and what pyright checks without a plugin.
"""

from __future__ import annotations

import gc
import hashlib
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from mypy.checker import TypeChecker
from mypy.nodes import CallExpr, MypyFile, SuperExpr, SymbolNode, TypeInfo
from mypy.options import Options
from mypy.plugin import (
    AnalyzeTypeContext,
    FunctionContext,
    FunctionSigContext,
    MethodContext,
    Plugin,
    ReportConfigContext,
)
from mypy.plugins.default import DefaultPlugin
from mypy.types import CallableType, FunctionLike, Type, get_proper_type

# errorcodes is imported here, with the plugin, so that mypy knows the codes before it
# validates disable_error_code and the like.
from veridic.mypy import _names, errorcodes

if TYPE_CHECKING:
    from veridic.mypy._config import PolicySettings
    from veridic.mypy._signature import Callee

__all__ = ["VeridicPlugin", "errorcodes", "plugin"]

_SKIPPED_PREFIX: Final = "builtins."
"""Built-ins have no ``LiteralString`` or instruction parameters worth a look-up."""

_VERIDIC: Final = _names.PACKAGE + "."
_ANALYZED: Final = _names.LITERAL_STRING | _names.BRANDS | {_names.INSTRUCTION_FIELD}
"""The annotations the plugin analyses itself (the brands only until ``_notes`` watches)."""
_FIELD_METHODS: Final = _names.MODEL_METHODS | {"validate_python"}
_UNVALIDATED: Final = frozenset({"model_construct", "model_copy"})
_VALIDATING: Final = frozenset({"model_validate", "model_validate_json", "model_validate_strings"})
"""``BaseModel`` methods that validate a generic model as filled in (``_bare_fields``)."""
"""``BaseModel`` methods that store values without validation (``_unvalidated``)."""


class VeridicPlugin(Plugin):
    """Routes mypy's hooks to the rule modules by the full name of what is called.

    The rule modules are imported when a hook first needs them: a warm run, where
    every module comes from mypy's cache, calls no hook and pays only for this one.
    """

    def __init__(self, options: Options) -> None:
        super().__init__(options)
        _require_last(options.plugins)
        _forget_previous_build()
        self._default = DefaultPlugin(options)
        """mypy's own hooks (``functools.partial``, ``len``, ...): the plugin wraps every call,
        and mypy asks the next plugin in its chain only when the first gives no hook."""
        self._walked: set[str] = set()
        """Modules whose references were looked at by their first call hook (``_escapes``)."""
        self._digest = _source_digest()
        self._settings: PolicySettings | None = None
        self._watching = False
        """Whether ``_notes`` watches mypy's errors already (no brand annotation needs it)."""
        self._checkers: dict[str, TypeChecker] = {}
        """The checker of each module a call hook ran in, until the end of its check, when
        the reports that need every expression's type run (``_any_declared``,
        ``_unchecked``)."""
        self._suspects: dict[str, bool] = {}
        """Per module checked in this build: whether it imports veridic's private minting
        names (or their modules) and is not reported yet. The first hook that runs in
        the module reports them (``_private``)."""

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
            and not any(part in ctx.path for part in _names.INSTALLED)
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
        if fullname not in _ANALYZED:
            return None  # asked about every name in every annotation: answer most at once
        if fullname in _names.LITERAL_STRING:
            from veridic.mypy import _literal_string

            return partial(_literal_string.analyze, self, fullname)
        if fullname == _names.INSTRUCTION_FIELD:
            from veridic.mypy import _fields

            return partial(_fields.analyze, self)
        if self._watching:
            return None
        from veridic.mypy import _notes

        if _notes.watching():
            self._watching = True
            return None
        return partial(_notes.analyze_brand, self, fullname)

    def get_function_signature_hook(
        self, fullname: str
    ) -> Callable[[FunctionSigContext], FunctionLike] | None:
        if fullname.startswith(_SKIPPED_PREFIX):
            return None
        symbol = self.lookup_fully_qualified(fullname)
        node = None if symbol is None else symbol.node
        if not isinstance(node, TypeInfo) or not node.has_base(_names.BASE_MODEL):
            return None
        from veridic.mypy import _fields

        return _fields.widen if "field" in _fields.fields_of(node).values() else None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        default = self._default.get_function_hook(fullname)
        if fullname in _names.REPLACE:
            from veridic.mypy import _replace

            return self._reporting(fullname, partial(_replace.check, self), default)
        if fullname.startswith(_SKIPPED_PREFIX):
            if fullname == _names.GETATTR:
                from veridic.mypy import _private

                return self._reporting(fullname, _private.check_getattr, default)
            return self._reporting(fullname, None, default)
        if fullname.startswith(_VERIDIC):
            special = self._veridic_function(fullname)
            if special is not None:
                return self._reporting(fullname, special, default)
        symbol = self.lookup_fully_qualified(fullname)
        node = None if symbol is None else symbol.node
        hook: Callable[[FunctionContext], Type] | None = self._call_hook(fullname, node)
        if isinstance(node, TypeInfo) and node.has_base(_names.BASE_MODEL):
            from veridic.mypy import _fields

            if _fields.fields_of(node):
                hook = partial(_fields.check_call, node, hook)
            if node.type_vars:
                hook = partial(_filled_first, hook)
        return self._reporting(fullname, hook, default)

    def _veridic_function(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        if fullname in _names.BRANDS:
            from veridic.mypy import _forging

            return partial(_forging.check, fullname)
        if fullname == _names.TRUST_POLICY:
            from veridic.mypy import _policy

            return partial(_policy.check, self.policies)
        if _names.is_private_minting(fullname):
            from veridic.mypy import _private

            return partial(_private.check_call, fullname)
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        default = self._default.get_method_hook(fullname)
        if fullname.startswith(_SKIPPED_PREFIX):
            return self._reporting(fullname, None, default)
        if fullname.startswith(_VERIDIC):
            if fullname == _names.TRUSTED_ADD:
                from veridic.mypy import _composition

                return _composition.check
            if _names.is_private_minting(fullname):
                from veridic.mypy import _private

                return self._reporting(fullname, partial(_private.check_call, fullname), default)
        from veridic.mypy import _sdk

        sdk = _sdk.hook(fullname)
        if sdk is not None:
            return sdk
        method = fullname.rpartition(".")[2]
        model: Callable[[MethodContext], Type] | None = None
        if method in _FIELD_METHODS:
            from veridic.mypy import _fields

            model = _fields.method_hook(self, fullname)
            if model is not None and method not in _UNVALIDATED:
                return self._reporting(fullname, model, default)
        if model is None:
            model = self._call_hook(*self._method(fullname))
        if method in _VALIDATING and _generic_model(self, fullname.rpartition(".")[0]):
            model = partial(_filled_first, model)
        if method in _UNVALIDATED:
            return self._reporting(fullname, partial(_unvalidated_first, method, model), default)
        return self._reporting(fullname, model, default)

    def _method(self, fullname: str) -> tuple[str, SymbolNode | None]:
        """The method ``fullname`` names, with its own full name: mypy names a method by the
        class of the object it is called on (``app.Child.set``), which need not define it
        (``app.Base.set``, inherited: its parameters were not checked through a subclass)."""
        symbol = self.lookup_fully_qualified(fullname)
        if symbol is not None:
            return fullname, symbol.node
        owner, _, name = fullname.rpartition(".")
        found = self.lookup_fully_qualified(owner)
        info = None if found is None else found.node
        if isinstance(info, TypeInfo):
            for base in info.mro[1:]:
                inherited = base.names.get(name)
                if inherited is not None:
                    return f"{base.fullname}.{name}", inherited.node
        return fullname, None

    def _call_hook(
        self, fullname: str, node: SymbolNode | None
    ) -> Callable[[FunctionContext | MethodContext], Type] | None:
        if node is None:
            return None
        from veridic.mypy import _signature

        callee = _signature.find(self, fullname, node)
        return None if callee is None else partial(_check_call, callee)

    def _reporting(
        self,
        fullname: str,
        hook: Callable[[_Context], Type] | None,
        default: Callable[[_Context], Type] | None,
    ) -> Callable[[_Context], Type]:
        """``hook`` (else mypy's own ``default`` hook), preceded by the checks every call gets.

        The first call hook run in a module reports its private imports, if it is a
        suspect (``_private``), and its references to functions that trust a
        ``LiteralString`` parameter (``_escapes``); every call's arguments are looked at
        for such a function passed as a value.
        """
        return partial(_each_call, self, fullname, hook, default)

    def get_additional_indirect_deps(self, file: MypyFile) -> set[str]:
        """Run the module-wide reports in a module that made no call (asked at the end of
        every module's check, while its checker still holds it).

        No call hook runs in a module without calls, yet it can keep a function that
        trusts its parameter in a variable typed ``Callable[[str], R]`` (another module
        then calls it with any ``str``), or hide a ``cast()`` to a brand in a helper's
        return. Only a module whose expressions could be reported costs more than a set
        look-up: mypy hands this hook the tree alone, so the checker is found through the
        objects that refer to the tree (``_checker_of``).

        In every module, the reports that need the type of each expression run here, when
        mypy has checked them all: ``Any`` given a trusted type (``_any_declared``) and
        trusting calls mypy skipped (``_unchecked``), with the checker the module's first
        call hook kept. In a ``.pyi`` stub, only its models' fields are read (``_bare_fields``).
        """
        walked = self._checkers.pop(file.fullname, None)
        if any(part in file.path for part in _names.INSTALLED):
            return set()  # mypy reports nothing in an installed package
        from veridic.mypy import (
            _any_declared,
            _any_overrides,
            _attribute_writes,
            _bare_fields,
            _checking_only,
            _covariant_writes,
            _escapes,
            _forging,
            _item_writes,
            _namespace,
            _narrowed_attrs,
            _notes,
            _overload_returns,
            _stub_trust,
            _unchecked,
        )

        if walked is not None:
            _in_module(walked, _any_declared.report)
            _in_module(walked, _attribute_writes.report_namespaces)
            _in_module(walked, _namespace.report_values)
            _in_module(walked, _item_writes.report)
            _in_module(walked, _forging.report_new)
            _in_module(walked, _notes.report_silenced)
            _in_module(walked, _any_overrides.report)
            _in_module(walked, _narrowed_attrs.report)
            _in_module(walked, _covariant_writes.report)
            _in_module(walked, _checking_only.report)
            _in_module(walked, _overload_returns.report)
            _in_module(walked, _unchecked.report)
            if file.is_stub and _stub_trust.may_report(file):
                _in_module(walked, _stub_trust.report)
            return set()
        if file.fullname in self._walked:
            return set()
        if file.is_stub:
            models, declared = _bare_fields.may_report(file), _stub_trust.may_report(file)
            if models or declared:
                checker = _checker_of(file)
                if models:
                    _in_module(checker, _bare_fields.report_module)
                if declared:
                    _in_module(checker, _stub_trust.report)
            return set()
        if not (
            self.suspect(file.fullname, file)
            or _escapes.may_report(file)
            or _bare_fields.may_report(file)
            or _any_declared.may_report(file)
            or _overload_returns.may_report(file)
            or _checking_only.may_report(file, self.options)
            or _covariant_writes.may_report(file)
            or _notes.has_silenced(file.path)
        ):
            return set()
        checker = _checker_of(file)
        _in_module(checker, self.first_call)
        _in_module(checker, _any_declared.report)
        _in_module(checker, _attribute_writes.report_namespaces)
        _in_module(checker, _namespace.report_values)
        _in_module(checker, _notes.report_silenced)
        _in_module(checker, _overload_returns.report)
        _in_module(checker, _checking_only.report)
        _in_module(checker, _covariant_writes.report)
        _in_module(checker, _unchecked.report)
        return set()

    def first_call(self, checker: TypeChecker) -> None:
        """The module-wide reports, once per module checked in this build."""
        tree = checker.tree
        if tree.fullname in self._walked:
            return
        self._walked.add(tree.fullname)
        self._checkers[tree.fullname] = checker
        if self.suspect(tree.fullname, tree):
            from veridic.mypy import _private

            self.reported(tree.fullname)
            _private.report_module(checker)
        from veridic.mypy import _bare_fields, _escapes

        _escapes.report_references(checker)
        _bare_fields.report_module(checker)

    def suspect(self, module: str, tree: MypyFile | None = None) -> bool:
        """Whether ``module`` imports private minting names and is not reported yet.

        Read from the module's tree when first asked, not from ``get_additional_deps``:
        mypy does not call that for a module whose cached metadata it reads, and then
        checks the module again when a dependency changed.
        """
        known = self._suspects.get(module)
        if known is None:
            if tree is None and self._modules is not None:
                tree = self._modules.get(module)
            if tree is None:
                return True  # not known here: the hook itself looks at the checked tree
            from veridic.mypy import _private

            known = self._suspects[module] = _private.suspects(tree)
        return known

    def reported(self, module: str) -> None:
        """``module``'s private imports are reported: the other hooks in it need not."""
        self._suspects[module] = False


_Context = TypeVar("_Context", FunctionContext, MethodContext)


def _each_call(
    plugin: VeridicPlugin,
    fullname: str,
    hook: Callable[[_Context], Type] | None,
    default: Callable[[_Context], Type] | None,
    ctx: _Context,
) -> Type:
    checker = ctx.api
    if isinstance(checker, TypeChecker):
        plugin.first_call(checker)
        from veridic.mypy import _escapes

        _escapes.check_arguments(fullname, ctx, checker)
        if hook is None and not _checked_through_super(plugin, ctx, checker):
            _escapes.check_call_through_value(ctx, checker)
    if hook is not None:
        return hook(ctx)
    return ctx.default_return_type if default is None else default(ctx)


def _checked_through_super(plugin: VeridicPlugin, ctx: _Context, checker: TypeChecker) -> bool:
    """Check a method called through ``super()`` as a call of it by name would be, and say
    whether it was one: mypy names no such call for the hooks (``super().__init__(**kwargs)``
    with ``Any`` items passed a trusted parameter of the base unseen)."""
    call = ctx.context
    if not (isinstance(call, CallExpr) and isinstance(call.callee, SuperExpr)):
        return False
    typ = get_proper_type(checker.lookup_type_or_none(call.callee))
    if not isinstance(typ, CallableType) or len(typ.arg_types) != len(ctx.args):
        return False  # an overload, or not this call's signature
    definition = typ.definition
    if definition is None:
        return False
    from veridic.mypy import _signature

    callee = _signature.find(plugin, definition.fullname, definition)
    if callee is None:
        return False
    _check_call(callee, ctx)
    return True


_PER_BUILD: Final = (
    "_attribute_writes",
    "_forging",
    "_fresh",
    "_item_writes",
    "_notes",
    "_fields",
    "_overrides",
    "_namespace",
    "_unchecked",
)
"""Rule modules that keep state for one build (mypy makes a plugin per build; a process,
such as a test run, may run several builds)."""


def _forget_previous_build() -> None:
    for name in _PER_BUILD:
        module = sys.modules.get(f"{__name__}.{name}")
        forget = getattr(module, "forget", None)
        if callable(forget):
            forget()


def _generic_model(plugin: Plugin, fullname: str) -> bool:
    symbol = plugin.lookup_fully_qualified(fullname)
    node = None if symbol is None else symbol.node
    return isinstance(node, TypeInfo) and bool(node.type_vars) and node.has_base(_names.BASE_MODEL)


def _filled_first(hook: Callable[[_Context], Type] | None, ctx: _Context) -> Type:
    """A generic model's constructor or ``model_validate``: the ``TrustedInstruction`` it
    is filled in with as written (``_bare_fields``), then the call's own hook."""
    from veridic.mypy import _bare_fields

    _bare_fields.check_filled(ctx)
    return ctx.default_return_type if hook is None else hook(ctx)


def _unvalidated_first(
    method: str, hook: Callable[[MethodContext], Type] | None, ctx: MethodContext
) -> Type:
    """``model_construct``/``model_copy``: the ``Literal`` fields they fill unvalidated
    (``_unvalidated``), then the call's own hook."""
    from veridic.mypy import _unvalidated

    _unvalidated.check(method, ctx)
    return ctx.default_return_type if hook is None else hook(ctx)


def _check_call(callee: Callee, ctx: FunctionContext | MethodContext) -> Type:
    from veridic.mypy import _any_guard, _minting, _notes

    if isinstance(ctx.api, TypeChecker):
        _notes.watch(ctx.api.msg.errors)
        _minting.check(ctx, callee, ctx.api)
        _any_guard.check(ctx, callee, ctx.api)
    return ctx.default_return_type


def _in_module(checker: TypeChecker | None, report: Callable[[TypeChecker], None]) -> None:
    """Run a module-wide ``report`` from the end of the module's check, where mypy's errors
    no longer point at the module: they are pointed at it again first."""
    if checker is None:
        return
    tree = checker.tree
    checker.errors.set_file(
        checker.path, tree.fullname, scope=checker.tscope, options=checker.options
    )
    with checker.tscope.module_scope(tree.fullname):
        report(checker)


def _checker_of(tree: MypyFile) -> TypeChecker | None:
    """The checker of ``tree``, found among the objects that refer to it.

    ``get_additional_indirect_deps`` gets only the tree, and the compiled mypy leaves no
    frame to read the checker from; mypy's ``State`` frees its checker only after the hook.
    A search of the referrers walks every object tracked by the garbage collector (some
    30 ms in a build of this repository), so it runs only for a module that makes no call
    and holds something to report.
    """
    for referrer in gc.get_referrers(tree):
        if isinstance(referrer, TypeChecker) and referrer.tree is tree:
            return referrer
    return None


def _mentions_policy(path: str) -> bool:
    try:
        return b"TrustPolicy" in Path(path).read_bytes()
    except OSError:
        return True


def _source_digest() -> str:
    """A digest of the plugin's own files, and of ``veridic.config`` whose rules it reads
    ``[tool.veridic]`` by: mypy hashes only the module it imports."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for path in [*sorted(here.glob("*.py")), here.parent / "config.py"]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _require_last(plugins: list[str]) -> None:
    """Stop mypy when another plugin is listed after this one.

    This plugin gives a hook for every call (``_escapes`` looks at every call's
    arguments for a function that trusts its parameter), and mypy asks the plugins
    after the first that gives a hook for nothing: theirs (django-stubs',
    pydantic's ``from_orm``, ...) would never run, and their checks would be lost
    without a word. Listed last, this plugin is asked for the calls no other plugin
    hooks, and chains mypy's own hooks itself.
    """
    own = [index for index, entry in enumerate(plugins) if _is_own(entry)]
    if own and own[-1] != len(plugins) - 1:
        after = ", ".join(plugins[own[-1] + 1 :])
        raise SystemExit(
            f"error: the veridic.mypy plugin is listed before {after} in mypy's plugins: "
            "veridic.mypy gives a hook for every call, so mypy would never ask the plugins "
            "after it, and their checks would be lost; list veridic.mypy last (for example "
            "plugins = pydantic.mypy, veridic.mypy)"
        )


def _is_own(entry: str) -> bool:
    """Whether a ``plugins`` entry (a module or a file, with an optional ``:function``)
    names this plugin."""
    target = entry.strip().rsplit(":", 1)[0] if entry.count(":") == 1 else entry.strip()
    if target == __name__:
        return True
    return target.endswith(".py") and Path(target).resolve() == Path(__file__).resolve()


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: ``plugins = veridic.mypy`` calls this with mypy's version."""
    return VeridicPlugin
