"""Tools: what the model may call, and the one place that says so.

``risk`` (levels and approval modes), ``tool`` (definitions, pins),
``registry`` (components and boot), ``view`` (a request's tools, the
capability section and dispatch), ``tool_specs`` (the provider formats),
``guards`` (the dispatch scope that store code checks) and ``plan``
(normalising a model's plan against a view).

It imports the text core and the package's bottom, nothing downstream.
"""
