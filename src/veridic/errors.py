"""Every error veridic raises, in one place.

A caller catches what it can act on: ``ProvenanceError`` when text of the
wrong provenance reached an instruction position (a programming error, hence a
``TypeError``), and a ``VeridicError`` subclass for everything the application
may want to handle at run time (a tool the site cannot run, a risk declaration
that breaks a floor, an "always allow" that is not allowed).

Each message has three parts: what is wrong, where it came from, and what to
do instead.
"""

from __future__ import annotations

__all__ = [
    "AlwaysAllowRefused",
    "ProvenanceError",
    "RiskFloorError",
    "ToolDeniedError",
    "ToolUnavailableError",
    "UnknownToolError",
    "VeridicError",
]


class VeridicError(Exception):
    """Base of every veridic error except :class:`ProvenanceError`."""


class ProvenanceError(TypeError):
    """Text of the wrong provenance reached a place that requires trusted text.

    A ``TypeError`` because it is the run-time twin of the type error that the
    ``veridic.mypy`` plugin reports for the same code.
    """


class UnknownToolError(VeridicError, LookupError):
    """A name that no tool was ever registered under."""


class ToolUnavailableError(VeridicError, LookupError):
    """A registered tool that cannot run here: its component did not start."""


class ToolDeniedError(VeridicError, PermissionError):
    """A registered, working tool that a policy filtered out of this view."""


class RiskFloorError(VeridicError):
    """A tool declared a risk below the floor its effects require."""


class AlwaysAllowRefused(VeridicError):
    """An "always allow" rule was asked for a tool whose risk forbids it."""
