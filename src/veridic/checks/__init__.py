"""The checks CI runs on an application, and the command line that runs them.

See the package root for the names users import; this subpackage holds
their modules (the README's layout table says which).
"""
