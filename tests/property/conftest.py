"""Hypothesis settings for the property tests.

``ACTRONE_HYPOTHESIS_PROFILE`` picks a profile: ``default`` (a few dozen examples a test, the
same ones every run, what CI runs) or ``thorough`` (ten times more, freshly random each run, for a
run by hand). There is no deadline: the examples talk to real servers on a shared machine.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "database": None,
    # One store (and one manager) serves every example of a test: examples use their own ids.
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}
settings.register_profile("default", max_examples=40, derandomize=True, **_COMMON)
settings.register_profile("thorough", max_examples=400, **_COMMON)
settings.load_profile(os.environ.get("ACTRONE_HYPOTHESIS_PROFILE", "default"))
