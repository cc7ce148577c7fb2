"""What a TPU run, or a forgotten TPU VM, costs: chip-hours times a dated, sourced price.

Cloud TPU charges accrue while a node is READY, whether or not it computes (Google's pricing
page). Prices differ by generation, region and commitment (on demand, spot, committed use) and
they change, so every row of ``data/tpu_prices.csv`` names its source and the date it was read,
and :func:`estimate` also takes a price you looked up yourself (https://cloud.google.com/tpu/pricing).

Accelerator-type names count different things: v5e (``v5litepod-N``) and v6e names count chips,
v2, v3, v4 and v5p names count TensorCores, two per chip (:func:`chips_in`, :func:`slice_name`).

``data/gpu_prices.csv`` holds GPU prices for comparison (an H100 per GPU-hour, the share of its
8-GPU VM, host included), read the same way. A row's ``status`` says how far to trust it: empty
for a list price as read, ``unverified`` where it could not be checked against Google's own page,
``doubtful`` where the source contradicts itself (the row's notes say how). Committed-use (1- and
3-year) columns exist in both tables but are empty where no page read published them, and then the
row's notes say so, with the pages and the date: asking for one is an error that says where the
number comes from (your contract, or the pricing page).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .hardware import data_rows, number
from .runtime import parse_accelerator_type

__all__ = [
    "Price",
    "Estimate",
    "prices",
    "price",
    "price_table",
    "estimate",
    "chips_in",
    "slice_name",
    "regions",
    "region_of",
    "COMMITMENTS",
    "KRW_PER_USD",
    "to_krw",
]

PRICING_PAGE = "https://cloud.google.com/tpu/pricing"
GPU_PRICING_PAGE = "https://cloud.google.com/compute/gpus-pricing"
CUD_PAGE = "https://cloud.google.com/tpu/docs/long-term-reservation"
COMMITMENTS = ("1y", "3y")
# Won per US dollar: the Seoul market's daytime close of 2025-12-30 (the year's last trading day), 1,439.0,
# as KBS World (http://world.kbs.co.kr/service/news_view.htm?Seq_Code=198497&lang=e) and Chosun Biz
# (https://biz.chosun.com/en/en-policy/2025/12/30/4S6DLFSVBFFIDAXH63TFFZSZNE/) reported it, read 2026-12-04;
# no later rate from an authoritative page was readable here. Re-read the Bank of Korea's rate on the day.
KRW_PER_USD = (1439.0, "2025-12-30")


def to_krw(usd: float, krw_per_usd: float | None = None) -> float:
    """US dollars in Korean won at ``krw_per_usd`` (default :data:`KRW_PER_USD`, dated 2025-12-30)."""
    rate = KRW_PER_USD[0] if krw_per_usd is None else krw_per_usd
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"krw_per_usd must be a positive number of won per dollar, got {rate!r}")
    return usd * rate


def chips_in(accelerator_type: str) -> int:
    """Chips in a slice named like ``v5litepod-8``, ``v6e-16`` or ``v4-32``.

    v5e and v6e names count chips; v2, v3, v4 and v5p names count TensorCores, two per chip.
    """
    parsed = parse_accelerator_type(accelerator_type)
    if parsed is None:
        raise ValueError(f"{accelerator_type!r} is not a TPU type like 'v5litepod-8', 'v6e-16' or 'v4-32'")
    return parsed[1]


_NAME_PREFIX = {
    "v5e": ("v5litepod", 1),
    "v6e": ("v6e", 1),
    "v5p": ("v5p", 2),
    "v4": ("v4", 2),
    "v3": ("v3", 2),
    "v2": ("v2", 2),
}


def slice_name(generation: str, chips: int) -> str | None:
    """The accelerator-type name of ``chips`` chips of ``generation``: ``("v5p", 4)`` -> ``"v5p-8"``,
    ``("v6e", 16)`` -> ``"v6e-16"``; None for a generation whose naming the table does not know."""
    if not isinstance(chips, int) or isinstance(chips, bool) or chips < 1:
        raise ValueError(f"chips must be a whole number >= 1, got {chips!r}")
    known = _NAME_PREFIX.get(generation)
    return None if known is None else f"{known[0]}-{chips * known[1]}"


def region_of(zone_or_name: str) -> str:
    """The region of a zone or a resource name: ``"us-east5-a"`` or
    ``"projects/p/locations/us-east5-a/nodes/x"`` -> ``"us-east5"``."""
    text = str(zone_or_name)
    if "/locations/" in text:
        text = text.split("/locations/", 1)[1].split("/", 1)[0]
    head, sep, tail = text.rpartition("-")
    if not sep or not head or len(tail) != 1 or not tail.isalpha():
        raise ValueError(
            f"{zone_or_name!r} is not a zone like 'us-east5-a' (or a name under projects/*/locations/<zone>)"
        )
    return head


@dataclass(frozen=True)
class Price:
    """List price of one chip-hour (TPU) or GPU-hour (GPU) in a region, with where and when it was read."""

    chip: str
    region: str
    on_demand_usd: float
    spot_usd: float | None
    source: str
    source_date: str
    notes: str = ""
    commit_1y_usd: float | None = None
    commit_3y_usd: float | None = None
    kind: str = "tpu"  # "tpu" (per chip-hour) or "gpu" (per GPU-hour, its share of the VM)
    status: str = ""  # "" (list price as read) | "unverified" | "doubtful" (see the row's notes)

    @property
    def trusted(self) -> bool:
        """False where the row could not be checked or contradicts its own source: draw no conclusion from it."""
        return not self.status

    def per_chip_hour(self, spot: bool = False, commitment: str | None = None) -> float:
        """On demand, ``spot=True``, or ``commitment="1y"``/``"3y"`` (committed use)."""
        if commitment is not None:
            if commitment not in COMMITMENTS:
                raise ValueError(
                    f"commitment must be one of {', '.join(COMMITMENTS)} (or None for on demand), got {commitment!r}"
                )
            if spot:
                raise ValueError("spot and a commitment do not combine: choose one")
            value = self.commit_1y_usd if commitment == "1y" else self.commit_3y_usd
            if value is None:
                raise ValueError(
                    f"no {commitment} committed-use price for {self.chip} in {self.region} in "
                    f"tpututor's table: not published on the pages read (the row's notes say "
                    f"which, and when); TPU committed-use discounts come with a reservation bought "
                    f"through Google Cloud sales ({CUD_PAGE}); pass price_per_chip_hour= from "
                    f"your contract or {PRICING_PAGE}"
                )
            return value
        if spot and self.spot_usd is None:
            raise ValueError(
                f"no spot price for {self.chip} in {self.region} in the table; "
                f"pass price_per_chip_hour= from {PRICING_PAGE}"
            )
        return self.spot_usd if spot else self.on_demand_usd


def _row(r: dict[str, str], kind: str) -> Price:
    return Price(
        r["chip"],
        r["region"],
        float(r["on_demand_usd"]),
        number(r["spot_usd"]),
        r["source"],
        r["source_date"],
        r.get("notes", ""),
        number(r.get("commit_1y_usd") or ""),
        number(r.get("commit_3y_usd") or ""),
        kind,
        (r.get("status") or "").strip(),
    )


@lru_cache(maxsize=1)
def prices() -> tuple[Price, ...]:
    """Every row of the price tables: TPUs (``data/tpu_prices.csv``), then GPUs (``data/gpu_prices.csv``)."""
    return tuple(_row(r, "tpu") for r in data_rows("tpu_prices.csv")) + tuple(
        _row(r, "gpu") for r in data_rows("gpu_prices.csv")
    )


def regions(chip: str | None = None) -> list[str]:
    """The regions the tables price (``chip``'s only, when given)."""
    return sorted({p.region for p in prices() if chip is None or p.chip == chip})


def _generation(chip: str) -> str:
    if not isinstance(chip, str) or not chip.strip():
        raise ValueError(f"chip must be a name like 'v6e', 'v5litepod-8' or 'H100', got {chip!r}")
    parsed = parse_accelerator_type(chip)  # None for a bare generation like "v6e"
    if parsed:
        return parsed[0]
    name = chip.strip()
    aliases = {"v5litepod": "v5e", "v5lite": "v5e"}
    return aliases.get(name.lower(), name if name[:1].isupper() else name.lower())


def price(chip: str, region: str = "us-central1") -> Price:
    """The table's row for ``chip`` (``"v6e"``, a slice name like ``"v6e-16"``, or ``"H100"``) in ``region``."""
    generation = _generation(chip)
    for row in prices():
        if row.chip == generation and row.region == region:
            return row
    have = sorted({(p.chip, p.region) for p in prices()})
    listed = ", ".join(f"{c} in {r}" for c, r in have)
    page = GPU_PRICING_PAGE if any(p.chip == generation and p.kind == "gpu" for p in prices()) else PRICING_PAGE
    raise ValueError(
        f"no price for {chip!r} in {region!r} in tpututor's table (it has {listed}); "
        f"look it up on {page} and pass price_per_chip_hour="
    )


def _label(url: str) -> str:
    """``https://github.com/o/repo/blob/<sha>/...`` -> ``repo@<sha7>``; other URLs -> their host."""
    parts = url.split("/")
    if len(parts) > 6 and parts[2] == "github.com" and parts[5] == "blob":
        return f"{parts[4]}@{parts[6][:7]}"
    return parts[2] if len(parts) > 2 else url


def price_table(region: str | None = None, kind: str | None = None) -> str:
    """The price table as Markdown (TPUs per chip-hour, GPUs per GPU-hour), with each row's source
    and the date it was read; ``kind="tpu"`` or ``"gpu"`` keeps one kind."""
    lines = [
        "| chip | region | on demand, USD per chip-hour | spot | 1-year commitment | 3-year commitment | read | "
        "status | source |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(value: float | None) -> str:
        return f"{value:.2f}" if value is not None else "–"

    for p in prices():
        if (region is None or p.region == region) and (kind is None or p.kind == kind):
            lines.append(
                f"| {p.chip} | {p.region} | {p.on_demand_usd:.2f} | {cell(p.spot_usd)} | "
                f"{cell(p.commit_1y_usd)} | {cell(p.commit_3y_usd)} | {p.source_date} | "
                f"{('**' + p.status + '**') if p.status else 'as read'} | [{_label(p.source)}]({p.source}) |"
            )
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
        """What the slice costs per day if it is left running (charges accrue while it is READY)."""
        return self.per_hour * 24

    @property
    def total(self) -> float:
        return self.per_hour * self.hours

    def line(self, currency: str = "$") -> str:
        return (
            f"{self.accelerator_type} ({self.chips} chips) at {currency}{self.price_per_chip_hour:.2f} per chip-hour: "
            f"{currency}{self.per_hour:,.2f}/hour, {currency}{self.per_day:,.2f}/day left running, "
            f"{currency}{self.total:,.2f} for {self.hours:g} h"
        )


def _check_non_negative(name: str, value) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")


def estimate(
    accelerator_type: str,
    price_per_chip_hour: float | None = None,
    hours: float = 1.0,
    *,
    region: str = "us-central1",
    spot: bool = False,
    commitment: str | None = None,
) -> Estimate:
    """Cost of ``hours`` on a slice.

    With ``price_per_chip_hour`` given, that price is used; without it, the table's list price
    for the slice's generation in ``region`` (on demand, ``spot=True``, or ``commitment="1y"`` /
    ``"3y"``), and ``Estimate.basis`` says which row and when it was read.
    """
    chips = chips_in(accelerator_type)
    _check_non_negative("hours", hours)
    if price_per_chip_hour is None:
        row = price(accelerator_type, region)
        value = row.per_chip_hour(spot, commitment)
        how = f"{commitment} committed-use" if commitment else ("spot" if spot else "on-demand")
        basis = f"{how} list price for {row.chip} in {row.region}, read {row.source_date} from {row.source}"
        if row.status:
            basis += f" ({row.status}: see the row's notes)"
    else:
        _check_non_negative("price_per_chip_hour", price_per_chip_hour)
        value, basis = float(price_per_chip_hour), "your price"
    return Estimate(accelerator_type, chips, float(value), float(hours), basis)
