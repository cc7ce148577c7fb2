"""tpututor: the helper package behind the tpututor notebooks.

Importing it imports no framework (no JAX, TensorFlow or torch): lessons use it
to find out what the machine has before they import anything heavy.

Modules: ``runtime`` (what is this machine), ``hardware`` (the chip table),
``doctor`` (the report), ``config`` (the ci/full profile), ``check``
(self-checking exercises), ``runner`` (execute lessons headless).
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import choose, profile  # noqa: E402  (cheap: standard library only)

__all__ = ["__version__", "choose", "profile"]
