"""Pallas TPU interpret mode across JAX 0.7.2 (Colab), 0.10 and 0.11: the three details that moved.

* :func:`interpret_params` builds ``pltpu.InterpretParams`` with the number of TensorCores per
  device spelled for the installed JAX: ``num_cores_per_device`` in 0.7.2,
  ``num_cores_or_threads`` in 0.10 and 0.11 (a megacore chip such as v4 or v5p has two). The
  other fields pass through unchanged, among them ``random_seed``: the interpreter visits the
  grid's ``"parallel"`` axes in a random order drawn from it (``None`` draws with seed 0, so
  even the default order is shuffled).
* :func:`races_found` reads the race detector's verdict on the last kernel run with
  ``detect_races=True``; the detector's state lives in ``jax._src.pallas.mosaic.interpret``
  in 0.7.2 and in its ``interpret_pallas_call`` submodule in 0.10 and 0.11.
* :func:`grid_point_recorder` makes the ``grid_point_recorder`` callback, which the interpreter
  calls with ``(grid point, core)`` in 0.7.2 and with ``(token, grid point, core)``, returning
  the token, in 0.10.

Everything else the lesson uses has one spelling in all three versions, so it is not wrapped
here: ``pl.ANY`` (``pltpu.ANY`` is gone by 0.10), ``pl.DeviceIdType`` and ``pl.semaphore_*``
(the ``pltpu.`` spellings are deprecated in 0.10 and removed in 0.11), ``pltpu.CompilerParams``,
``pltpu.InterpretParams`` and ``pltpu.reset_tpu_interpret_mode_state``.

JAX is imported inside the functions only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["cores_field", "interpret_params", "races_found", "grid_point_recorder"]

_CORES_FIELDS = ("num_cores_or_threads", "num_cores_per_device")


def cores_field() -> str:
    """The ``InterpretParams`` field for TensorCores per device in the installed JAX."""
    from jax.experimental.pallas import tpu as pltpu

    fields = getattr(pltpu.InterpretParams, "__dataclass_fields__", {})
    for name in _CORES_FIELDS:
        if name in fields:
            return name
    raise RuntimeError(
        f"this JAX's pltpu.InterpretParams has none of {_CORES_FIELDS}; tpututor.pallas_compat needs updating for it"
    )


def interpret_params(*, cores: int = 1, **kwargs: Any):
    """``pltpu.InterpretParams(**kwargs)`` simulating ``cores`` TensorCores per device.

    ``interpret_params(detect_races=True, cores=2)`` runs a kernel as a megacore chip would,
    with its ``parallel`` grid axes split across two cores; ``random_seed=1`` changes the order
    in which the ``parallel`` axes are visited (on one core too).
    """
    if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
        raise ValueError(f"cores must be a positive integer (TensorCores per device), got {cores!r}")
    from jax.experimental.pallas import tpu as pltpu

    clash = [k for k in kwargs if k in _CORES_FIELDS]
    if clash:
        raise ValueError(
            f"pass the number of cores as cores=..., not {clash[0]}=... (that field's name depends on the JAX version)"
        )
    return pltpu.InterpretParams(**kwargs, **({cores_field(): cores} if cores != 1 else {}))


def races_found() -> bool:
    """True if the race detector reported a race in the last kernel interpreted with
    ``detect_races=True`` (False when no such kernel has run since the last reset)."""
    for module in ("jax._src.pallas.mosaic.interpret.interpret_pallas_call", "jax._src.pallas.mosaic.interpret"):
        try:
            found = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(found, "races"):
            state = found.races
            return bool(state is not None and state.races_found)
    raise RuntimeError(
        "this JAX keeps TPU interpret mode's race state somewhere tpututor.pallas_compat "
        "does not know; read the 'RACE DETECTED' lines the detector prints instead"
    )


def grid_point_recorder(log: list) -> Callable[..., Any]:
    """A ``grid_point_recorder`` for ``InterpretParams`` that appends ``(grid point, core)`` to ``log``.

    ``interpret_params(grid_point_recorder=grid_point_recorder(visits))`` fills ``visits`` with
    the grid points in the order the interpreter ran them, each with the (per-device) core that
    ran it, on any of the JAX versions above.
    """
    if not isinstance(log, list):
        raise ValueError(f"pass a list to collect the grid points in, got {type(log).__name__}")

    def record(*args):
        if len(args) == 3:  # JAX 0.10 and later: (token, grid point, core) -> token
            token, point, core = args
        elif len(args) == 2:  # JAX 0.7.2: (grid point, core) -> None
            token, (point, core) = None, args
        else:
            raise TypeError(
                f"grid_point_recorder called with {len(args)} arguments; "
                "tpututor.pallas_compat needs updating for this JAX"
            )
        log.append((tuple(int(i) for i in point), int(core)))
        return token

    return record
