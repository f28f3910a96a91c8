"""Shared test configuration: hypothesis profiles.

``make test`` runs the moderate ``default`` profile (the whole suite stays well
under ten minutes on two cores); ``make fuzz`` runs ``fuzz`` at a high
example count. Deadlines are off: timing is the benchmarks' business.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile(
    "fuzz",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
