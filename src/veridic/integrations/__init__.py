"""veridic under the frameworks and protocols applications already use.

``mcp`` (tools of an MCP server as pinned external tools, and a view served
over MCP), ``pydantic_ai``, ``openai_agents`` and ``langchain`` (a view's
tools as the framework's tools, with veridic's approvals and audit
underneath). Each module imports its library lazily and raises
:class:`~veridic.MissingExtraError` naming the extra (``veridic[mcp]``, ...).

It imports the run, the tools and the text core; only the command line
(``veridic mcp pin``) imports it.
"""
