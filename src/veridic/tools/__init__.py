"""Tools: what the model may call, and the one place that says so.

``risk`` (levels and approval modes), ``tool`` (definitions),
``registry`` (components and boot), ``boot_failure`` (``BootError``, and
what a failed boot check may tell the model), ``view`` (a request's tools, the
capability section and dispatch), ``status`` (what a view says about a name
or a component), ``filters`` (which tools a view withholds, and why),
``schema_tool`` (the built-in ``get_tool_schema``), ``tool_specs`` (the
provider formats), ``guards`` (the dispatch scope that store code checks) and
``plan`` (normalising a model's plan against a view).

``wording`` holds :class:`CapabilityWording`, the words of the capability
section around the view's facts (re-exported here and at the package root).
``context`` holds :class:`ToolContext`, what a handler that asks for it is
given of its request (re-exported here and at the package root).

A tool's parts have modules of their own below ``tool``, which imports their
names back: ``input_schema`` (what every tool's input schema shares),
``pins`` (how code vouches for an external tool's text), ``function_schema``
(a function tool's input schema, read from its signature) and
``_external_schema`` (an external tool's input schema, used as its spec gives
it).

It imports the text core and the package's bottom, nothing downstream.
"""

from veridic.tools.context import ToolContext
from veridic.tools.wording import CapabilityWording

__all__ = ["CapabilityWording", "ToolContext"]
