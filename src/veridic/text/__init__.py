"""The text core: where text gets its brand and becomes a prompt.

``provenance`` (the brands, minting, spans), ``fields`` (fields read as
instruction), ``trust_policy`` (vouching for stored text), ``fence`` (data
blocks and their modes), ``compose`` (the composer), ``prompt`` (the built
prompt and its hash), ``message`` (a message and its parts), ``reasoning``
(the model's reasoning items), ``document`` (the saved prompt, read back for
display) and ``wire`` (the message shapes providers accept).

It imports only the package's bottom (``errors``, ``config``): everything
else in veridic is downstream of it. Users import these names from
``veridic``.
"""
