"""The run profile: ``full`` sizes for learners, ``ci`` sizes for CI and quick checks.

The environment variable ``TPUTUTOR_PROFILE`` chooses it, so papermill,
nbval and a learner's own kernel all see the same choice; a notebook's
``parameters`` cell may override it (``papermill -p profile ci``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeVar

__all__ = ["PROFILES", "ENV_VAR", "profile", "choose"]

PROFILES = ("full", "ci")
ENV_VAR = "TPUTUTOR_PROFILE"
T = TypeVar("T")


def profile(value: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The profile in force: ``value`` if given, else ``$TPUTUTOR_PROFILE``, else ``"full"``."""
    env = os.environ if env is None else env
    chosen = value if value not in (None, "") else env.get(ENV_VAR, "") or "full"
    chosen = str(chosen).strip().lower()
    if chosen not in PROFILES:
        source = "the profile parameter" if value not in (None, "") else f"${ENV_VAR}"
        raise ValueError(
            f"unknown profile {chosen!r} from {source}: use 'full' or 'ci' "
            f"(e.g. {ENV_VAR}=ci, or papermill -p profile ci)"
        )
    return chosen


def choose(active: str, *, full: T, ci: T) -> T:
    """Pick the value for the active profile: ``choose(p, full=4096, ci=1024)``."""
    if active not in PROFILES:
        raise ValueError(f"unknown profile {active!r}: use 'full' or 'ci'")
    return full if active == "full" else ci
