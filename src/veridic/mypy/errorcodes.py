"""The error codes of the ``veridic.mypy`` plugin: one per rule.

Each works like one of mypy's own codes. Silence one rule for the whole
project or for some modules with ``disable_error_code = veridic-any`` in the
mypy configuration (or ``--disable-error-code veridic-any``), or on one line
with ``# type: ignore[veridic-forge]``. ``veridic hatches`` lists every such
ignore comment, so a silenced check stays visible in review.

=====================  =====================================================
code                   what it rejects
=====================  =====================================================
``veridic-literal``    text that was not written in code passed to
                       ``instruction()`` or to any ``LiteralString`` parameter
``veridic-forge``      a call of the ``TrustedInstruction`` or
                       ``UntrustedText`` NewType constructor outside veridic,
                       the constructor passed as a value, a ``cast()`` to a
                       brand, a use of veridic's private minting helpers
                       (``mint``, ``_Trusted``, ...) outside veridic, or a
                       pydantic field typed ``TrustedInstruction``
``veridic-any``        a value of type ``Any`` reaching an instruction position
``veridic-policy``     a ``TrustPolicy`` name that is not a literal, or not in
                       ``[tool.veridic] trust-policies``
``veridic-launder``    text branded ``UntrustedText`` handed to an
                       ``InstructionField`` (a model's constructor,
                       ``model_validate``, ``TypeAdapter``), whose validation
                       would mint it
``veridic-sdk``        a provider SDK call outside the gateway whose system
                       prompt, or system/developer message, is not trusted
=====================  =====================================================
"""

from __future__ import annotations

from typing import Final

from mypy.errorcodes import ErrorCode

__all__ = ["ANY", "CODES", "FORGE", "LAUNDER", "LITERAL", "POLICY", "SDK"]

_CATEGORY: Final = "veridic"

LITERAL: Final = ErrorCode(
    "veridic-literal",
    "Check that instruction() and LiteralString parameters get text written in code",
    _CATEGORY,
)
"""``instruction(x)`` or ``helper(x)`` (with ``x`` a ``LiteralString`` parameter) got text
that was not written in code: a variable, an f-string with values, ``str(...)``, ``%``,
``.format()``, a call, ``UntrustedText``. mypy itself reads ``LiteralString`` as ``str``.
Also such a function, or a class whose constructor is one, passed on as a value where it
is called unchecked, and a ``Final`` text constant rewritten through its module's
namespace (``globals()``, ``setattr(module, ...)``, a module looked up by name)."""

FORGE: Final = ErrorCode(
    "veridic-forge",
    "Check that brands are minted by veridic, not made with the NewType constructor",
    _CATEGORY,
)
"""``TrustedInstruction(x)`` or ``UntrustedText(x)`` outside veridic: the NewType constructor
accepts any ``str`` and records no provenance, so the composer refuses the value at run time.
The same for the constructor passed as a value (``map(TrustedInstruction, texts)``,
``TypeAdapter(TrustedInstruction)``) and a ``cast()`` to a brand: a ``TrustedText`` position
cannot tell such a value from text written in code.
Also an import or use of veridic's private minting names (``mint``, ``mint_spans``, ``joined``
and the ``_``-prefixed names of ``veridic.text.provenance`` and ``veridic.text.fields``)
outside veridic: they mint without any check. And a pydantic model's field typed
``TrustedInstruction`` without ``InstructionField``: pydantic stores a plain ``str`` there,
so the type claims a brand the value never has. And other text written into an attribute
declared trusted by ``setattr()`` or through the object's ``vars()``, or a ``type: ignore``
of mypy's own code that kept a ``str`` typed trusted (outside an argument of veridic's own).
And an attribute declared trusted over a base's attribute that takes any ``str``, trusted
text declared under ``if TYPE_CHECKING:`` without a body (or bound again in the branch only
the run time reads), and a module's variable declared trusted written through the module's
namespace (``globals()``, ``setattr(module, ...)``, a module looked up by name). And
other text written into trusted text where mypy checks the write against a wider type or
against nothing: through a covariant view of a generic object (``box.item = reply`` on a
``Box[str]``), a ``TypedDict``'s ``__setitem__`` called by its name, ``NamedTuple._make()``,
and a ``__new__`` called by its name with a brand's class (``str.__new__(type(minted),
reply)``)."""

ANY: Final = ErrorCode(
    "veridic-any",
    "Check that no value of type Any reaches an instruction position",
    _CATEGORY,
)
"""A value typed ``Any`` (an untyped library's result, ``json.loads``) reaches a
``TrustedInstruction`` or ``LiteralString`` parameter, a ``join()`` part or a ``TrustPolicy``
name, or is assigned (or bound by a ``for`` or ``with`` target, a default, a walrus, a
``case`` capture, ``setattr()``) to a
target declared to hold a ``TrustedInstruction``, where mypy would otherwise accept it
silently."""

POLICY: Final = ErrorCode(
    "veridic-policy",
    "Check that TrustPolicy names are literals listed in [tool.veridic] trust-policies",
    _CATEGORY,
)
"""``TrustPolicy(name)`` whose name is not known in the code, or is missing from the
``trust-policies`` list of ``[tool.veridic]`` when that list is configured."""

LAUNDER: Final = ErrorCode(
    "veridic-launder",
    "Check that untrusted text is never handed to a field read as instruction",
    _CATEGORY,
)
"""``StoredPrompt(content=u)``, ``StoredPrompt.model_validate({"content": u})``,
``TypeAdapter(InstructionField).validate_python(u)`` with ``u`` of type ``UntrustedText``:
validating text into an ``InstructionField`` mints it, so outside text would come out trusted.
The run time refuses it too. A plain ``str`` is accepted: declaring the field is the
application's decision that the stored text instructs."""

CODES: Final = (LITERAL, FORGE, ANY, POLICY, LAUNDER)
"""The codes of the brand checks, whose cases are in tests/typecheck/ (``SDK``'s are apart)."""

SDK: Final = ErrorCode(
    "veridic-sdk",
    "Check that provider SDK calls give instructions only in trusted text",
    _CATEGORY,
)
"""An ``anthropic`` ``messages.create(system=...)``, an ``openai`` ``responses.create(
instructions=...)``, or a system/developer message in ``chat.completions.create(messages=...)``
(and their async, beta, stream and parse variants) given text that is not a
``TrustedInstruction``: the call goes around ``ModelGateway``, so only the type checker sees it.
Its cases are in tests/typecheck/sdk/ (run by tests/test_sdk_typecheck.py)."""
