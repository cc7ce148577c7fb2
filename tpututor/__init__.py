"""tpututor: the helper package behind the tpututor notebooks.

Importing it imports no framework (no JAX, TensorFlow or torch): lessons use it
to find out what the machine has before they import anything heavy.

Modules: ``runtime`` (what is this machine), ``hardware`` (the chip table),
``doctor`` (the report), ``bench`` and ``roofline`` (measuring), ``hlo``,
``metrics`` (torch_xla), ``mesh``, ``profile`` (reading traces), ``config``
(the ci/full run profile), ``check`` (self-checking exercises), ``runner``
(execute lessons headless).
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import choose  # noqa: E402  (cheap: standard library only)
from .config import profile as run_profile  # noqa: E402  (tpututor.profile is the trace module)

__all__ = ["__version__", "choose", "run_profile"]
