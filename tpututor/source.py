"""Show package code in a lesson: what a helper does, printed where the lesson condenses it.

``show(lm.device_prefetch)`` displays the source of functions, classes or modules (or a code
string) as a Python block: rendered Markdown in a notebook, plain text elsewhere. Lessons use it
so that no helper is a black box: the code a cell calls is one call away from being read.
"""

from __future__ import annotations

import inspect
import textwrap

__all__ = ["source_of", "show"]


def source_of(*objects: object) -> str:
    """The source of each object (a code string is taken as it is), dedented, blank-line separated."""
    if not objects:
        raise ValueError("show what? pass functions, classes, modules or a code string, e.g. show(lm.LM)")
    parts = []
    for obj in objects:
        if isinstance(obj, str):
            parts.append(textwrap.dedent(obj).strip("\n"))
            continue
        try:
            parts.append(textwrap.dedent(inspect.getsource(obj)).rstrip("\n"))
        except (TypeError, OSError) as exc:
            raise TypeError(
                f"no source to show for {obj!r} ({exc}): pass a function, class or module defined in a .py file"
            ) from None
    return "\n\n".join(parts)


def show(*objects: object) -> None:
    """Display :func:`source_of` ``objects`` as a Python code block (Markdown in IPython, else printed)."""
    code = source_of(*objects)
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        print(code)
        return
    if get_ipython() is None:
        print(code)
    else:
        display(Markdown(f"```python\n{code}\n```"))
