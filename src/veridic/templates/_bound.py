"""Bound templates: a compiled template, its parameter type, and how it renders.

The public classes :class:`InstructionTemplate` and :class:`DataTemplate` are
documented with :mod:`veridic.templates`, which creates them; this module
holds how a render runs and what it checks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import Enum
from typing import Generic, TypeVar

from jinja2 import Template as JinjaTemplate
from jinja2.exceptions import SecurityError
from jinja2.exceptions import TemplateError as JinjaTemplateError
from pydantic import BaseModel

from veridic._sample import class_named, clip
from veridic._words import a_type
from veridic.config import settings
from veridic.errors import ProvenanceError, TemplateError, TemplateSandboxError, VeridicError
from veridic.templates._analysis import Analysis
from veridic.templates._budget import render
from veridic.templates._env import ProvenanceEnvironment, SandboxedProvenanceEnvironment
from veridic.templates._params import (
    Check,
    Params,
    declared_text,
    error_message,
    ordered,
    snapshot,
    trusted_text,
)
from veridic.templates._runtime import cut, instruction_text, reported
from veridic.text.fence import DataMode, block_parts, check_label, check_mode
from veridic.text.provenance import (
    Span,
    TrustedInstruction,
    UntrustedText,
    describe,
    fenced_block,
    is_trusted,
)

__all__ = ["Bound", "DataTemplate", "InstructionTemplate", "P"]

P = TypeVar("P", bound="Mapping[str, object] | BaseModel")
"""A template's parameter type: a ``TypedDict`` or a pydantic model."""

_log = logging.getLogger("veridic")


class Bound(Generic[P]):
    """A compiled template bound to its parameter type; shared, immutable, thread-safe."""

    __slots__ = ("_analysis", "_env", "_params", "_template", "name", "origin", "sandboxed")

    def __init__(
        self,
        template: JinjaTemplate,
        env: ProvenanceEnvironment,
        params: Params,
        analysis: Analysis,
        origin: str,
    ) -> None:
        self._template = template
        self._env = env
        self._params = params
        self._analysis = analysis
        self.name: str = template.name or origin
        """The template's load name (for a stored source: its origin and a digest)."""
        self.origin: str = origin
        """The template's file path, or the origin of its stored source."""
        self.sandboxed: bool = isinstance(env, SandboxedProvenanceEnvironment)
        """Whether it renders in jinja2's sandbox (a template from stored text)."""

    @property
    def variables(self) -> frozenset[str]:
        """The variables the template reads: the keys of its parameter type."""
        return self._analysis.variables

    def _run(self, values: dict[str, object]) -> list[str]:
        template = self._template
        try:
            chunks = template.root_render_func(template.new_context(values))
            if self.sandboxed:
                return render(chunks)  # under the render's budget (_budget)
            return list(chunks)
        except SecurityError as error:
            raise self._sandbox_error(error) from error
        except (OverflowError, RecursionError) as error:
            if not self.sandboxed:
                raise self._failed(error) from error
            raise self._sandbox_error(error) from error
        except JinjaTemplateError as error:
            raise TemplateError(
                f"template {self.origin!r}{_line(error)} failed to render: {_said(error)}; "
                "pass every variable it reads, and check its attribute and item names against the "
                "values' types"
            ) from error
        except (VeridicError, MemoryError):
            raise
        except Exception as error:
            # The template's own expression failed (1 / 0, "a" + 1, .index of what is not
            # there, a filter given the wrong type): a caller catches it as a TemplateError
            # like every other, the original its cause. jinja2's and Python's messages
            # quote the value whole (an untrusted one may be megabytes): clipped here.
            raise self._failed(error) from error

    def _failed(self, error: Exception) -> TemplateError:
        """What a render whose expression raised ``error`` raises: the template, the line,
        the error clipped, and what to fix."""
        if self.sandboxed:
            whose, fix = "stored template", "fix the stored template"
        else:
            whose, fix = "template", "fix the template or the values passed to it"
        return TemplateError(
            f"{whose} {self.origin!r}{_line(error)} failed to render: "
            f"{class_named(error)}: {clip(error_message(error))}; an expression of the template "
            f"failed on the values it was given: {fix}, or guard the expression "
            "({% if %}, |default)"
        )

    def _sandbox_error(self, error: Exception) -> TemplateSandboxError:
        return TemplateSandboxError(
            f"stored template {self.origin!r}{_line(error)} tried something jinja2's sandbox "
            f"forbids: {_said(error)}; a template from stored text may use its variables, filters "
            "and tests, not Python internals, changes to the lists, dicts and sets it reads, "
            "unbounded ranges, nesting past Python's recursion limit or results too large to "
            "write (a power, a repetition, a padding, loops, calls or values past the "
            "sandbox's bounds): remove that from "
            "the stored template, or ship the template with the code and load it with "
            "Templates(directory)"
        )


class InstructionTemplate(Bound[P]):
    """A template whose output instructs: :meth:`render` returns a ``TrustedInstruction``.

    Obtain one with :meth:`Templates.instruction` or
    :meth:`Templates.instruction_from_source`.
    """

    __slots__ = ("_checks", "_head", "_mints")

    def __init__(
        self,
        template: JinjaTemplate,
        env: ProvenanceEnvironment,
        params: Params,
        analysis: Analysis,
        origin: str,
        checks: dict[str, Check],
        mints: bool,
    ) -> None:
        super().__init__(template, env, params, analysis, origin)
        self._checks = tuple(checks.items())
        self._head = (Span(0, 0, "template", origin),)
        self._mints = mints

    def render(self, params: P) -> TrustedInstruction:
        """Render with trusted values into trusted text.

        The result's provenance is kind ``template`` with the template's file
        as origin; its spans keep every part: the template's literal text
        (kind ``template``, origin ``file:line``), each value as it was
        minted, and text computed from values (``file:line`` of the expression).

        Raises:
            ProvenanceError: a value is not trusted (checked before rendering;
                the message names the variable, the template and the line).
                In report mode the violation is logged and the result is a
                plain ``str``: report mode never mints.
            TemplateError: the render failed (an undefined attribute, a
                sandbox violation: :class:`~veridic.errors.TemplateSandboxError`, an
                expression or filter that raised, whose error is the cause).
        """
        values = self._params.values(params)
        mints = self._mints
        for key, check in self._checks:
            if key in values:
                value = values[key]
                if check is trusted_text and is_trusted(value):
                    continue  # the common case
                # Checked as it will be read: the render gets this copy (see snapshot).
                value = values[key] = snapshot(value)
                bad = check(value)
                if bad is not None:
                    self._refuse(key, bad)
                    mints = False
        chunks, let_pass = reported(lambda: self._run(values))
        text = instruction_text(chunks, self._head)
        if not mints or let_pass:
            return TrustedInstruction(str.__str__(text))  # report mode: plain text
        return text

    def _refuse(self, key: str, bad: tuple[str, object]) -> None:
        path, value = bad
        where = self._analysis.where.get(key)
        place = f" ({where[0]} line {where[1]})" if where is not None else ""
        if isinstance(value, Enum):
            message = (
                f"instruction template {self.origin!r} got, for variable {key!r}{path}{place}, "
                f"{clip(repr(value))}, which is not a member that the class body of "
                f"{type(value).__name__} wrote (a pseudo-member its _missing_ made from a "
                "value: its text is that value, which may be outside text), or not of the Enum "
                f"that {self._params.name} declares there: pass one of the declared Enum's own "
                "members, or render outside text with a data template (templates.data) and "
                "place it with Composer.user()"
            )
        elif isinstance(value, str):
            message = (
                f"instruction template {self.origin!r} got, for variable {key!r}{path}{place}, "
                f"text of {describe(value)}: {clip(value)}; {self._text_fix(key)}"
            )
        else:
            message = (
                f"instruction template {self.origin!r} got, for variable {key!r}{path}{place}, "
                f"{a_type(value)}{_shown(value)}, which its parameter type "
                f"{self._params.name} does not allow there: pass a value of the declared type "
                "(scalars by exact type: an int subclass or a float for an int is refused)"
            )
        if settings().mode == "report":
            _log.warning("report mode, let pass: %s", message, extra={"veridic_sink": self.origin})
            return
        raise ProvenanceError(message)

    def _text_fix(self, key: str) -> str:
        """What text may fill ``key``, and what to do: a Literal variable takes its words."""
        shown, trusted, words = declared_text(self._params, key)
        data = (
            "or render this text with a data template (templates.data) and place it with "
            "Composer.user()"
        )
        if not words and not trusted:
            return (
                f"{self._params.name} declares {key!r} as {shown}, which takes no text: pass "
                f"a value of the declared type, {data}"
            )
        if not words:
            return (
                "an instruction template renders into the system slot, so only "
                "TrustedInstruction values may fill it: mint the value with instruction() or "
                f"read it from an InstructionField, {data}"
            )
        listed = ", ".join(repr(word) for word in words[:10])
        more = f" and {len(words) - 10} more" if len(words) > 10 else ""
        minted = " or a TrustedInstruction (mint it with instruction())" if trusted else ""
        return (
            f"{self._params.name} declares {key!r} as {shown}, and an instruction template "
            "renders into the system slot, so text fills it only as one of the values code "
            f"wrote ({listed}{more}){minted}: check a value that comes from outside against "
            f"them before the render and pass one of them, {data}"
        )


class DataTemplate(Bound[P]):
    """A template for a user turn: :meth:`render` gives its whole output as one data block.

    Obtain one with :meth:`Templates.data` or :meth:`Templates.data_from_source`.
    """

    __slots__ = ("_label", "_sets")

    def __init__(
        self,
        template: JinjaTemplate,
        env: ProvenanceEnvironment,
        params: Params,
        analysis: Analysis,
        origin: str,
        sets: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(template, env, params, analysis, origin)
        self._sets = sets
        self._label = _block_label(self.name, stored=self.sandboxed)

    def render(self, params: P, *, mode: DataMode = "datamark") -> UntrustedText:
        """Render into one data block for a user turn (``Composer.user``).

        The template's text and every value in it are the block's content,
        rendered as jinja2 renders them and then shown in ``mode`` (see
        :mod:`veridic.text.fence`), under the template's name as label:
        :func:`veridic.unfence` on the result gives back ``[(name, output)]``.
        A data template formats data; it never instructs, so nothing in it
        needs a provenance of its own. A variable whose declared type holds a
        set, or is ``Any`` or ``object``, gets each set (in its lists, tuples,
        mappings, dataclasses and models) read sorted: a set's order changes from
        process to process, and the block's bytes must not. The result is ``UntrustedText`` whose
        source is the template's origin; :meth:`~veridic.Composer.user` places it
        as the block it is (and adds the fence preamble for its mode).

        Raises:
            TemplateError: the render failed (an undefined attribute, a
                sandbox violation: :class:`~veridic.errors.TemplateSandboxError`, an
                expression or filter that raised, whose error is the cause).
            VeridicError: ``mode`` is not a data mode.
            TemplateParamsError: a set's items cannot be sorted (text beside numbers, a
                NaN, which is in no order and equal to nothing).
        """
        chosen = check_mode(mode, f"{type(self).__name__}.render(mode=...)")
        values = self._params.values(params)
        for key in self._sets:  # declared to hold sets: sorted, for the same bytes everywhere
            if key in values:
                values[key] = ordered(values[key], f"variable {key!r} of {self.origin!r}")
        text = "".join(self._run(values))
        block = "".join(block_parts(self._label, text, chosen))
        return fenced_block(block, self.origin, chosen)


_STORED_ORIGIN_SHOWN = 120
"""Characters of a stored template's origin its block's label keeps (the digest names it)."""


def _block_label(name: str, *, stored: bool) -> str:
    """The label of a data template's block: its name, which must be a label.

    A file's name is the application's to choose: one that is no label (longer than
    200 characters, a line break, an invisible character) is refused when the template
    loads, since a block under another label would not say where it came from. A stored
    template's name is veridic's own (``<stored ORIGIN DIGEST>``), its origin whatever the
    application named: that is clipped to characters a label may hold, and the digest
    still names the source.
    """
    try:
        check_label(name)
    except VeridicError as error:
        if not stored:
            raise TemplateError(
                f"data template {clip(name)} cannot be loaded: its name labels its data "
                f"block, and {error}; rename the file (a path of at most 200 printable "
                "characters relative to the template directory)"
            ) from error
        head, _, digest = name.removesuffix(">").rpartition(" ")
        kept = "".join(char for char in head[:_STORED_ORIGIN_SHOWN] if _in_label(char))
        label = f"{kept}… {digest}>" if len(head) > _STORED_ORIGIN_SHOWN else f"{kept} {digest}>"
        check_label(label)
        return label
    return name


def _in_label(char: str) -> bool:
    try:
        check_label(char)
    except VeridicError:
        return False
    return True


def _shown(value: object) -> str:
    """`` (its repr)`` of a refused value, nothing for None (said as itself already)."""
    return "" if value is None else f" ({clip(repr(value))})"


_SAID = 160
"""Characters of jinja2's own message a render error quotes as it is: its messages name
types and attributes (``'dict object' has no attribute 'title'``), which fit."""


def _said(error: BaseException) -> str:
    """The message of ``error``: veridic's own whole, jinja2's clipped and escaped if need be.

    jinja2's quotes the key or attribute name it missed or refused, which a template may
    take from a value (``{{ rows[value] }}``, ``|attr(value)``): outside text, megabytes of
    it maybe, or a terminal's escape sequences, which a message must not carry whole. A
    check of veridic's own (the sandbox's bounds) quotes what it was given clipped, and
    says what to do: that is kept whole, up to a bound (:data:`_OWN_SAID`).
    """
    said = error_message(error)
    if _raised_in(error).startswith("veridic."):
        return cut(said, _OWN_SAID)
    if said.isprintable() and len(said) <= _SAID:
        return said
    return clip(said, _SAID)


_OWN_SAID = 1_000
"""Characters of veridic's own message a render error quotes: all of every message, but
one that quotes what it was given at length (a ``%`` format's mapping key, whole)."""


def _raised_in(error: BaseException) -> str:
    """The name of the module whose code raised ``error`` (its innermost frame)."""
    module = ""
    trace = error.__traceback__
    while trace is not None:
        module = trace.tb_frame.f_globals.get("__name__", "")
        trace = trace.tb_next
    return module


def _line(error: BaseException) -> str:
    """`` (file line N)`` of the innermost template frame in ``error``'s traceback."""
    found = ""
    trace = error.__traceback__
    while trace is not None:
        template = trace.tb_frame.f_globals.get("__jinja_template__")
        if isinstance(template, JinjaTemplate):
            line = template.get_corresponding_lineno(trace.tb_lineno)
            found = f" ({template.filename or template.name} line {line})"
        trace = trace.tb_next
    return found
