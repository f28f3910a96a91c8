"""Tools: definitions, risk, the registry, views and their projections, tool specs, the dispatch scope the guards read, and plans.

See the package root for the names users import; this subpackage holds
their modules (the README's layout table says which).
"""
