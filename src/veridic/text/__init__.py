"""The text core: brands and their provenance, flagged fields, data fences and their modes, the composer, the prompt and its wire formats, trust policies.

See the package root for the names users import; this subpackage holds
their modules (the README's layout table says which).
"""
