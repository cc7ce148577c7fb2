"""Argument checks the helpers share, so a bad argument reads the same wherever it is given.

Standard library only: modules that run before a framework starts use it too.
"""

from __future__ import annotations

__all__ = ["LANGUAGES", "positive_ints", "language"]

LANGUAGES = ("en", "ko")  # what a learner can read the course in: English, and the Korean edition


def positive_ints(**values: object) -> None:
    """Raise ValueError naming the first argument that is not a whole number above 0 (``True`` is not one).

    >>> positive_ints(m=4, k=8)
    >>> positive_ints(m=0)
    Traceback (most recent call last):
    ValueError: m must be a positive integer, got 0
    """
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def language(lang: str) -> str:
    """``lang`` if the course speaks it (:data:`LANGUAGES`), else a ValueError naming the choices.

    >>> language("ko")
    'ko'
    """
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    return lang
