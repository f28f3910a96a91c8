"""The checks CI runs on an application, and the ``veridic`` command that runs them.

``lint`` (descriptions and risk), ``doc_gaps`` (tools the model cannot
understand), ``manifest`` (the reviewed snapshot and its drift), ``hatches``
(every escape from the type checks) and ``cli``.

It reads a registry from the outside, as CI does; nothing in the library
imports it.
"""
