"""What a TPU run, or a forgotten TPU VM, costs: arithmetic over a price you look up.

TPU prices change, differ by region and by commitment (on demand, spot,
committed use), and are billed per chip-hour while a TPU VM exists (READY),
whether or not it computes. This module does the arithmetic; the price per
chip-hour is an argument, taken from https://cloud.google.com/tpu/pricing on
the day you plan. (A dated, sourced price table is not shipped yet: see the
course's issue on lesson 04.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .runtime import parse_accelerator_type

__all__ = ["Estimate", "estimate", "chips_in"]


def chips_in(accelerator_type: str) -> int:
    """Chips in a slice named like ``v5litepod-8``, ``v6e-16`` or ``v4-32``.

    v5e and v6e names count chips; v2, v3, v4 and v5p names count TensorCores, two per chip.
    """
    parsed = parse_accelerator_type(accelerator_type)
    if parsed is None:
        raise ValueError(f"{accelerator_type!r} is not a TPU type like 'v5litepod-8', 'v6e-16' or 'v4-32'")
    return parsed[1]


@dataclass(frozen=True)
class Estimate:
    accelerator_type: str
    chips: int
    price_per_chip_hour: float
    hours: float

    @property
    def per_hour(self) -> float:
        return self.chips * self.price_per_chip_hour

    @property
    def per_day(self) -> float:
        """What the slice costs per day if it is left running (a TPU VM bills while it exists)."""
        return self.per_hour * 24

    @property
    def total(self) -> float:
        return self.per_hour * self.hours

    def line(self, currency: str = "$") -> str:
        return (f"{self.accelerator_type} ({self.chips} chips) at {currency}{self.price_per_chip_hour:.2f} per chip-hour: "
                f"{currency}{self.per_hour:,.2f}/hour, {currency}{self.per_day:,.2f}/day left running, "
                f"{currency}{self.total:,.2f} for {self.hours:g} h")


def estimate(accelerator_type: str, price_per_chip_hour: float, hours: float = 1.0) -> Estimate:
    """Cost of ``hours`` on a slice at ``price_per_chip_hour`` (look it up; prices change)."""
    for name, value in (("price_per_chip_hour", price_per_chip_hour), ("hours", hours)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return Estimate(accelerator_type, chips_in(accelerator_type), float(price_per_chip_hour), float(hours))
