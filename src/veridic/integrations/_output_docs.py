"""Which descriptions of a framework's structured output are code text.

A structured output (LangChain's ``response_format``, the Agents SDK's ``output_type``,
pydantic-ai's output types) reaches the model described by its schema, as an output tool
beside the view's or as the provider's response format, and the model reads that
description as instructions. The rule is the registry's for a tool's docstring: a class's
docstring is code text, unless its ``__doc__`` is branded untrusted (set from outside text:
``pydantic.create_model(__doc__=...)``, ``Answer.__doc__ = ...``), which is refused as a
tool's is; a description given as a value may have been read from anywhere, so it must be
trusted text (``instruction(...)``). A plain ``str`` set as ``__doc__`` cannot be told
from code at run time: the ``veridic.mypy`` plugin and code review are the checks there.
"""

from __future__ import annotations

import inspect

from veridic.text.provenance import is_trusted, is_untrusted

__all__ = ["code_described", "docstrings"]


def docstrings(source: object) -> frozenset[str]:
    """The docstring of ``source`` (a class or a function) as written and as pydantic cleans
    it for a schema; none when it has none, or when it is branded untrusted."""
    if not (isinstance(source, type) or callable(source)):
        return frozenset()  # a JSON schema dict: its class's docstring describes nothing
    doc = getattr(source, "__doc__", None)
    if not isinstance(doc, str) or is_untrusted(doc):
        return frozenset()
    return frozenset({str.__str__(doc), inspect.cleandoc(doc)})


def code_described(text: str, source: object) -> bool:
    """Whether ``text``, a description of the structured output ``source``, is code text:
    trusted text, or ``source``'s own docstring (see :func:`docstrings`)."""
    return is_trusted(text) or text in docstrings(source)
