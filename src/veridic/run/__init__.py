"""The run: a request's calls approved, executed, observed and recorded.

``approval`` (policies and rules), ``executor`` (``execute``/``aexecute``),
``effects`` (observing what a tool's code does), ``audit`` (records and
stores) and ``gateway`` (the model call loop over a provider adapter), with
``call_log`` (where the gateway records its model calls), ``reply`` (what a
model call gives back) and ``run_loop`` (what a run counts and how it ended).

It imports the tools, the text core and the package's bottom.
"""
