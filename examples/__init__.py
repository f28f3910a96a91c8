"""Runnable applications, one per scenario of the articles in shared/seeds.

Run them from the repository root: ``python -m examples.signup_agent``,
``python -m examples.prompt_store``, or ``python examples/demo.py`` for both
after the composer demonstration (what ``make demo`` runs).
"""
