"""What a TPU run, or a forgotten TPU VM, costs: chip-hours times a dated, sourced price.

TPU VMs bill per chip-hour while they exist (READY), whether or not they compute. Prices differ
by generation, region and commitment (on demand, spot, committed use) and they change, so every
row of ``data/tpu_prices.csv`` names its source and the date it was read, and
:func:`estimate` also takes a price you looked up yourself (https://cloud.google.com/tpu/pricing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .hardware import data_rows, number
from .runtime import parse_accelerator_type

__all__ = ["Price", "Estimate", "prices", "price", "price_table", "estimate", "chips_in"]

PRICING_PAGE = "https://cloud.google.com/tpu/pricing"


def chips_in(accelerator_type: str) -> int:
    """Chips in a slice named like ``v5litepod-8``, ``v6e-16`` or ``v4-32``.

    v5e and v6e names count chips; v2, v3, v4 and v5p names count TensorCores, two per chip.
    """
    parsed = parse_accelerator_type(accelerator_type)
    if parsed is None:
        raise ValueError(f"{accelerator_type!r} is not a TPU type like 'v5litepod-8', 'v6e-16' or 'v4-32'")
    return parsed[1]


@dataclass(frozen=True)
class Price:
    """List price of one chip-hour of a generation in a region, with where and when it was read."""

    chip: str
    region: str
    on_demand_usd: float
    spot_usd: float | None
    source: str
    source_date: str
    notes: str = ""

    def per_chip_hour(self, spot: bool = False) -> float:
        if spot and self.spot_usd is None:
            raise ValueError(f"no spot price for {self.chip} in {self.region} in the table")
        return self.spot_usd if spot else self.on_demand_usd


@lru_cache(maxsize=1)
def prices() -> tuple[Price, ...]:
    """Every row of the price table (``tpututor/data/tpu_prices.csv``)."""
    return tuple(Price(r["chip"], r["region"], float(r["on_demand_usd"]), number(r["spot_usd"]),
                       r["source"], r["source_date"], r.get("notes", "")) for r in data_rows("tpu_prices.csv"))


def price(chip: str, region: str = "us-central1") -> Price:
    """The table's row for ``chip`` (``"v6e"``, or a slice name like ``"v6e-16"``) in ``region``."""
    parsed = parse_accelerator_type(chip)  # None for a bare generation like "v6e"
    generation = parsed[0] if parsed else chip
    for row in prices():
        if row.chip == generation and row.region == region:
            return row
    have = sorted({(p.chip, p.region) for p in prices()})
    listed = ", ".join(f"{c} in {r}" for c, r in have)
    raise ValueError(f"no price for {chip!r} in {region!r} in tpututor's table (it has {listed}); "
                     f"look it up on {PRICING_PAGE} and pass price_per_chip_hour=")


def _label(url: str) -> str:
    """``https://github.com/o/repo/blob/<sha>/...`` -> ``repo@<sha7>``; other URLs -> their host."""
    parts = url.split("/")
    if len(parts) > 6 and parts[2] == "github.com" and parts[5] == "blob":
        return f"{parts[4]}@{parts[6][:7]}"
    return parts[2] if len(parts) > 2 else url


def price_table(region: str | None = None) -> str:
    """The price table as Markdown, with each row's source and the date it was read."""
    lines = ["| chip | region | on demand, USD per chip-hour | spot | read | source |", "|---|---|---|---|---|---|"]
    for p in prices():
        if region is None or p.region == region:
            spot = f"{p.spot_usd:.2f}" if p.spot_usd is not None else "–"
            lines.append(f"| {p.chip} | {p.region} | {p.on_demand_usd:.2f} | {spot} | {p.source_date} | "
                         f"[{_label(p.source)}]({p.source}) |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Estimate:
    accelerator_type: str
    chips: int
    price_per_chip_hour: float
    hours: float
    basis: str = "your price"

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


def _check_non_negative(name: str, value) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")


def estimate(accelerator_type: str, price_per_chip_hour: float | None = None, hours: float = 1.0, *,
             region: str = "us-central1", spot: bool = False) -> Estimate:
    """Cost of ``hours`` on a slice.

    With ``price_per_chip_hour`` given, that price is used; without it, the table's list price
    for the slice's generation in ``region`` (on demand, or ``spot=True``), and
    ``Estimate.basis`` says which row and when it was read.
    """
    chips = chips_in(accelerator_type)
    _check_non_negative("hours", hours)
    if price_per_chip_hour is None:
        row = price(accelerator_type, region)
        value = row.per_chip_hour(spot)
        basis = (f"{'spot' if spot else 'on-demand'} list price for {row.chip} in {row.region}, "
                 f"read {row.source_date} from {row.source}")
    else:
        _check_non_negative("price_per_chip_hour", price_per_chip_hour)
        value, basis = float(price_per_chip_hour), "your price"
    return Estimate(accelerator_type, chips, float(value), float(hours), basis)
