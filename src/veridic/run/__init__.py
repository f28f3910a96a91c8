"""The run: approvals, effect observation, audit stores, the executor and the model gateway.

See the package root for the names users import; this subpackage holds
their modules (the README's layout table says which).
"""
