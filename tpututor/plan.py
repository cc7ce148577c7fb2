"""Plan a training run before paying for it, and review a TPU request before sending it.

:func:`plan` is the model behind ``python -m tpututor plan``: the memory per chip for parameters,
gradients and optimizer state under data parallelism (every chip holds everything) and FSDP
(ZeRO-3: every chip holds 1/N), whether that fits the chip's HBM, the time to train from
``6 x parameters x tokens`` FLOPs at a given MFU, and the cost on demand and spot from
:mod:`tpututor.cost`'s dated prices. Every assumption is listed with the result. The default
training state is **16 bytes per parameter** (f32 weights and gradients, Adam's two f32 moments),
what lesson 08a (training) keeps; the scaling book's checks pass bf16 weights and no gradients.
It follows *How to Scale Your Model* (jax-ml/scaling-book, ``training.md`` and
``applied-training.md``), and its tests check it against that book's worked LLaMA 3 numbers.

:func:`compile_check` (``plan ... --compile v5e-8``) checks the formula with the TPU compiler itself
(libtpu, no TPU needed): it compiles :mod:`tpututor.lm`'s real train step at the planned size, FSDP
over the slice, from abstract arrays, and reads the compiler's memory per device (activations and
temporaries included) or its refusal, naming the largest allocations.

:func:`review` looks at a TPU node request (a ``google.cloud.tpu_v2.Node``, a ``QueuedResource``,
or their REST JSON) for the classic mistakes: an accelerator type the zone does not offer
(``data/tpu_zones.csv``), a spot VM with no checkpoint to durable storage, an external IP, a
broad service account or scope, no OS Login, no secure boot; and it notes what the request needs
from the project (preemptible quota for spot, Private Google Access and Cloud NAT without
external IPs). :func:`forgotten` finds VMs left running and prices them in their own region.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "Memory",
    "Plan",
    "Finding",
    "Forgotten",
    "plan",
    "gated_width",
    "transformer_params",
    "review",
    "forgotten",
    "STRATEGIES",
    "SCALING_BOOK",
    "CompileCheck",
    "CompilerUnavailable",
    "compile_check",
    "lm_shape",
    "largest_allocations",
    "compiler_figures",
    "biggest_buffers",
    "eng",
    "SANE",
]

STRATEGIES = ("DP", "FSDP")
SCALING_BOOK = "https://github.com/jax-ml/scaling-book"
GIB = 2**30


def _positive(name: str, value: Any, *, example: str, integer: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if ok and integer and value != int(value):
        ok = False
    if not ok:
        kind = "a positive whole number" if integer else "a positive number"
        raise ValueError(f"{name} must be {kind} (for example {example}), got {value!r}")
    return float(value)


# What a real training run can be: outside these the figures mean nothing (a typo, a unit slip).
SANE = {
    "params": (1e5, 1e13, "100 thousand to 10 trillion parameters"),
    "tokens": (1e6, 1e16, "a million to 10 quadrillion tokens"),
    "chips": (1, 200_000, "1 to 200,000 chips"),
}


def _sane(name: str, value: float) -> float:
    low, high, words = SANE[name]
    if not low <= value <= high:
        raise ValueError(
            f"{name} = {value:.3g} is outside any real training run ({words}); check the units (8e9 is 8 billion)"
        )
    return value


def eng(x: float, unit: str = "") -> str:
    """A figure in engineering notation with an SI prefix: 1.23e13 -> '12.3 T'."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g} {unit}".strip()
    prefixes = {-3: "n", -2: "u", -1: "m", 0: "", 1: "k", 2: "M", 3: "G", 4: "T", 5: "P", 6: "E", 7: "Z", 8: "Y"}
    k = max(-3, min(8, int(math.floor(math.log10(abs(x)) / 3))))
    return f"{x / 10 ** (3 * k):.3g} {prefixes[k]}{unit}".strip()


def _non_negative(name: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative number of bytes per parameter, got {value!r}")
    return float(value)


def transformer_params(
    layers: int,
    d_model: int,
    vocab: int,
    *,
    d_ff: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    ffw_matrices: int = 3,
    tied_embeddings: bool = False,
) -> int:
    """Parameters of a decoder-only transformer, counted the way the scaling book's LLaMA chapter does.

    Per layer: ``ffw_matrices x d_model x d_ff`` (3 for a gated MLP, 2 for a plain one) plus
    ``2 x d_model x heads x head_dim`` (queries, output) and ``2 x d_model x kv_heads x head_dim``
    (keys, values); plus ``vocab x d_model`` for the input embedding and as much again for the
    output one unless ``tied_embeddings``. Norms and biases are left out (they are tiny).
    """
    for name, v in (("layers", layers), ("d_model", d_model), ("vocab", vocab)):
        _positive(name, v, example="32", integer=True)
    heads = heads or max(1, d_model // 64)
    head_dim = head_dim or d_model // heads
    kv_heads = kv_heads or heads
    d_ff = d_ff or 4 * d_model
    attention = 2 * d_model * heads * head_dim + 2 * d_model * kv_heads * head_dim
    per_layer = ffw_matrices * d_model * d_ff + attention
    embeddings = vocab * d_model * (1 if tied_embeddings else 2)
    return int(layers * per_layer + embeddings)


@dataclass(frozen=True)
class Memory:
    """Bytes per chip for one strategy, and whether they fit the chip's HBM."""

    strategy: str
    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    hbm_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.hbm_bytes

    @property
    def free_bytes(self) -> float:
        """HBM left for activations, the compiled program and its buffers (negative: does not fit)."""
        return self.hbm_bytes - self.total_bytes

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            total_bytes=self.total_bytes,
            free_bytes=self.free_bytes,
            fits=self.fits,
            **{
                f"{k}_gib": v / GIB
                for k, v in (
                    ("params", self.params_bytes),
                    ("grads", self.grads_bytes),
                    ("optimizer", self.optimizer_bytes),
                    ("total", self.total_bytes),
                    ("hbm", self.hbm_bytes),
                )
            },
        )
        return d


@dataclass(frozen=True)
class Plan:
    """A training run: memory per chip, time and cost, and the assumptions behind each."""

    params: float
    tokens: float
    chip: str
    chip_label: str
    chips: int
    mfu: float
    region: str
    peak_flops: float
    memory: dict[str, Memory]
    price_on_demand: float | None
    price_spot: float | None
    price_basis: str
    assumptions: list[str] = field(default_factory=list)
    unit: str = "chip"  # "chip" for TPUs, "GPU" for GPUs
    batch: int | None = None  # sequences per step, all chips together (None: not asked)
    seq_len: int | None = None
    comm_threshold: float | None = None  # tokens per chip above which compute hides the gradient sum

    @property
    def tokens_per_chip(self) -> float | None:
        """Tokens each chip processes per step; None without a batch."""
        return None if self.batch is None else self.batch * self.seq_len / self.chips

    @property
    def communication_bound(self) -> bool | None:
        """True when too few tokens per chip leave the gradient sum exposed; None when not asked or
        not modelled (GPUs, a chip count that is not a standard torus)."""
        if self.tokens_per_chip is None or self.comm_threshold is None:
            return None
        return self.tokens_per_chip < self.comm_threshold

    @property
    def steps(self) -> float | None:
        return None if self.batch is None else self.tokens / (self.batch * self.seq_len)

    @property
    def flops(self) -> float:
        return 6 * self.params * self.tokens

    @property
    def seconds(self) -> float:
        return self.flops / (self.chips * self.peak_flops * self.mfu)

    @property
    def hours(self) -> float:
        return self.seconds / 3600

    @property
    def days(self) -> float:
        return self.seconds / 86400

    @property
    def chip_hours(self) -> float:
        return self.chips * self.hours

    @property
    def cost_on_demand(self) -> float | None:
        return None if self.price_on_demand is None else self.chip_hours * self.price_on_demand

    @property
    def cost_spot(self) -> float | None:
        return None if self.price_spot is None else self.chip_hours * self.price_spot

    def fits(self, strategy: str = "FSDP") -> bool:
        return self.memory[strategy].fits

    @property
    def slice_name(self) -> str | None:
        """The accelerator-type name of this many chips (``v5p-512`` for 256 v5p chips); None for GPUs."""
        from . import cost

        return cost.slice_name(self.chip, self.chips) if self.unit == "chip" else None

    @property
    def naming(self) -> str:
        if self.chip in ("v5p", "v4", "v3", "v2"):
            return f"{self.chip} names count TensorCores, two per chip"
        return f"{self.chip} names count chips" if self.slice_name else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "tokens": self.tokens,
            "chip": self.chip,
            "chips": self.chips,
            "mfu": self.mfu,
            "region": self.region,
            "peak_flops_per_chip": self.peak_flops,
            "memory_per_chip": {k: m.to_dict() for k, m in self.memory.items()},
            "flops": self.flops,
            "seconds": self.seconds,
            "hours": self.hours,
            "days": self.days,
            "chip_hours": self.chip_hours,
            "slice_name": self.slice_name,
            "batch": None
            if self.batch is None
            else {
                "sequences": self.batch,
                "seq_len": self.seq_len,
                "tokens_per_chip": self.tokens_per_chip,
                "steps": self.steps,
                "compute_bound_above_tokens_per_chip": self.comm_threshold,
                "communication_bound": self.communication_bound,
            },
            "cost_usd": {
                "on_demand": self.cost_on_demand,
                "spot": self.cost_spot,
                "price_on_demand": self.price_on_demand,
                "price_spot": self.price_spot,
                "basis": self.price_basis,
            },
            "assumptions": list(self.assumptions),
        }

    def text(self) -> str:
        """The plan as the CLI prints it."""
        m = self.memory
        unit = self.unit
        lines = [
            f"Plan: {self.params:.3g} parameters, {self.tokens:.3g} tokens on {self.chips} x {self.chip_label} "
            f"({self.region}), MFU {self.mfu:.0%}",
            "",
            f"{'memory per ' + unit + ' (GiB)':<28}{'DP':>10}{'FSDP':>10}",
        ]
        for label, key in (
            ("parameters", "params_bytes"),
            ("gradients", "grads_bytes"),
            ("optimizer state", "optimizer_bytes"),
        ):
            lines.append(f"  {label:<26}{getattr(m['DP'], key) / GIB:>10.2f}{getattr(m['FSDP'], key) / GIB:>10.2f}")
        lines.append(f"  {'total':<26}{m['DP'].total_bytes / GIB:>10.2f}{m['FSDP'].total_bytes / GIB:>10.2f}")
        lines.append(f"  {'HBM':<26}{m['DP'].hbm_bytes / GIB:>10.2f}{m['FSDP'].hbm_bytes / GIB:>10.2f}")
        verdict = {k: ("yes" if v.fits else "NO") for k, v in m.items()}
        lines.append(f"  {'fits? (state only)':<26}{verdict['DP']:>10}{verdict['FSDP']:>10}")
        for k, v in m.items():
            if v.fits:
                lines.append(
                    f"  {k}: fits (state only, {v.free_bytes / GIB:.1f} GiB left for activations, the "
                    "program and its buffers)"
                )
            else:
                lines.append(f"  {k}: does NOT fit ({-v.free_bytes / GIB:.1f} GiB over, before any activation)")
        lines += [""]
        if self.slice_name:
            lines.append(f"slice    {self.chips} chips = accelerator type {self.slice_name} ({self.naming})")
            lines.append(
                "quota    Cloud TPU quota for them, per project, region and TPU version; on-demand and "
                "preemptible (spot) counted apart"
            )
        lines += [
            f"compute  6 x {self.params:.3g} x {self.tokens:.3g} = {self.flops:.3g} FLOPs",
            f"time     {self.flops:.3g} / ({self.chips} x {self.peak_flops / 1e12:g} TFLOP/s x {self.mfu:g}) "
            f"= {self.seconds:.3g} s = {self.hours:,.0f} h = {self.days:,.1f} days",
            f"{unit}-hours {self.chip_hours:,.0f}",
        ]
        if self.batch is not None:
            lines.append(
                f"batch    {self.batch} x {self.seq_len} tokens = {eng(self.batch * self.seq_len)} tokens per "
                f"step, {self.tokens_per_chip:,.0f} per {unit}; {eng(self.steps)} steps"
            )
            if self.communication_bound is None:
                lines.append("         (no ICI model for this chip or chip count: communication not checked)")
            elif self.communication_bound:
                lines.append(
                    f"WARNING  communication-bound: {self.tokens_per_chip:,.0f} tokens per {unit} is below the "
                    f"{self.comm_threshold:,.0f} at which the backward pass hides the gradient sum; the time "
                    "above is out of reach. Raise the batch, use fewer chips, or send bf16 gradients"
                )
            else:
                lines.append(
                    f"         compute-bound: above the {self.comm_threshold:,.0f} tokens per {unit} at which "
                    "the backward pass hides the gradient sum"
                )
        if self.cost_on_demand is None:
            lines.append(f"cost     {self.price_basis}")
        else:
            lines.append(f"cost     on demand ${self.price_on_demand:.2f}/{unit}-h: ${self.cost_on_demand:,.0f}")
            if self.cost_spot is not None:
                lines.append(
                    f"         spot      ${self.price_spot:.2f}/{unit}-h: ${self.cost_spot:,.0f} "
                    "(spot VMs can be taken back at any time: checkpoint)"
                )
            lines.append(f"         ({self.price_basis})")
        lines += ["", "assumptions:"] + [f"  - {a}" for a in self.assumptions]
        return "\n".join(lines)


def plan(
    params: float,
    tokens: float,
    chip: str,
    chips: int,
    mfu: float = 0.4,
    *,
    region: str = "us-central1",
    price_per_chip_hour: float | None = None,
    param_bytes: float = 4,
    grad_bytes: float = 4,
    optimizer_bytes: float = 8,
    hbm_bytes: float | None = None,
    batch: int | None = None,
    seq_len: int = 1024,
) -> Plan:
    """Memory per chip (DP and FSDP), time and cost of training ``params`` parameters on ``tokens`` tokens.

    ``chip`` is a chip-table name (``"v5p"``, ``"v6e"``, ``"H100"``); ``chips`` how many **chips**
    (not TensorCores: 4 v5p chips are a v5p-8). The state defaults to 16 bytes per parameter (f32
    weights and gradients, Adam's two f32 moments, as lesson 08a (training) trains); the scaling book's tables
    use ``param_bytes=2, grad_bytes=0``. The cost uses the price table's row for ``chip`` in
    ``region`` unless ``price_per_chip_hour`` is given. ``hbm_bytes`` overrides the chip table's HBM
    (to reproduce a worked example that uses another).

    With ``batch`` (sequences per step, all chips together) of ``seq_len`` tokens, the plan also
    asks whether the step is compute bound: the gradients' all-reduce (DP) or reduce-scatter and
    all-gathers (FSDP) hide behind the backward pass only above a number of tokens per chip (the
    scaling book's C / W, ``tpututor.mesh.data_parallel_threshold``, for the slice's torus and
    the gradients' bytes). Below it, :attr:`Plan.communication_bound` is True and the text warns.
    """
    from . import cost, hardware

    params = _sane("params", _positive("params", params, example="8e9"))
    tokens = _sane("tokens", _positive("tokens", tokens, example="1e12"))
    n = int(_sane("chips", _positive("chips", chips, example="256", integer=True)))
    if batch is not None:
        batch = int(_positive("batch", batch, example="256 sequences", integer=True))
        seq_len = int(_positive("seq_len", seq_len, example="2048", integer=True))
    if not (isinstance(mfu, (int, float)) and not isinstance(mfu, bool) and 0 < mfu <= 1):
        raise ValueError(f"mfu must be a fraction in (0, 1], for example 0.4 for 40%, got {mfu!r}")
    found = hardware.find(chip) if isinstance(chip, str) else None
    if found is None:
        known = ", ".join(c.name for c in hardware.chips() if c.peak_flops)
        raise ValueError(f"unknown chip {chip!r}: use one of {known}")
    if not found.peak_flops or not found.hbm_bytes:
        raise ValueError(
            f"{found.name} has no bf16 peak or HBM in the chip table, so it cannot be planned; "
            "choose a chip with bf16 matrix units"
        )
    pb, gb, ob = (
        _non_negative(k, v)
        for k, v in (("param_bytes", param_bytes), ("grad_bytes", grad_bytes), ("optimizer_bytes", optimizer_bytes))
    )
    hbm = found.hbm_bytes if hbm_bytes is None else _positive("hbm_bytes", hbm_bytes, example="96e9")
    memory = {
        "DP": Memory("DP", params * pb, params * gb, params * ob, hbm),
        "FSDP": Memory("FSDP", params * pb / n, params * gb / n, params * ob / n, hbm),
    }
    unit = "chip" if found.kind == "tpu" else "GPU"
    if price_per_chip_hour is not None:
        cost_spot = None
        price_od = float(_positive("price_per_chip_hour", price_per_chip_hour, example="2.70"))
        basis = f"your price, ${price_od:.2f} per {unit}-hour (no spot price given)"
    else:
        if region not in cost.regions():
            raise ValueError(
                f"no prices for region {region!r} in tpututor's table (it prices "
                f"{', '.join(cost.regions())}); choose one of those or pass price_per_chip_hour= "
                f"(--price) from {cost.PRICING_PAGE}"
            )
        try:
            row = cost.price(found.name, region)
            price_od, cost_spot = row.on_demand_usd, row.spot_usd
            basis = f"list prices for {row.chip} in {row.region}, read {row.source_date} from {row.source}"
            if row.status:
                basis = (
                    f"{row.status.upper()} row (its notes say why; check {cost.GPU_PRICING_PAGE if row.kind == 'gpu' else cost.PRICING_PAGE} "
                    f"and pass --price): " + basis
                )
        except ValueError:
            price_od = cost_spot = None
            basis = (
                f"no list price for {found.name} in {region} in tpututor's table: pass price_per_chip_hour= "
                f"(--price) from {cost.PRICING_PAGE}"
            )
    assumptions = [
        f"training FLOPs = 6 x parameters x tokens (forward 2, backward 4; attention's own FLOPs ignored), "
        f"as the scaling book counts them ({SCALING_BOOK}, applied-training.md)",
        f"MFU {mfu:.0%} of the chip table's dense bf16 peak ({found.peak_flops / 1e12:g} TFLOP/s per {unit}, "
        f"{found.source}, read {found.source_date}); measure yours (the training lesson measures it) and pass it",
        f"{pb:g} bytes per parameter for weights, {gb:g} for gradients, {ob:g} for optimizer state = "
        f"{pb + gb + ob:g} in all (the default 4 + 4 + 8 = 16 is f32 weights and gradients with Adam's two f32 "
        "moments, what lesson 08a (training) trains; bf16 weights with an f32 master copy: --param-bytes 2 --optimizer-bytes 12)",
        "DP keeps everything on every chip; FSDP (ZeRO-3) splits parameters, gradients and optimizer state "
        f"evenly over all {n} chips",
        "activations, the compiled program and its temporary buffers are NOT counted: the HBM left over "
        "must hold them (they grow with batch x sequence and shrink with rematerialisation)",
        f"HBM {hbm / GIB:.1f} GiB per {unit}"
        + (" (your figure)" if hbm_bytes is not None else f" (chip table, {found.source_date})"),
        "perfect scaling: no time lost to communication, input, checkpoints, restarts or preemption; "
        "the time is a lower bound at this MFU",
        f"cost = {unit}s x hours x price for the run itself (Cloud TPU charges accrue while the node is READY); "
        "storage, network, idle time before and after, and reruns after preemption are extra",
    ]
    if found.kind == "tpu":
        assumptions.append(
            f"{n} means chips; the accelerator type names them "
            + (
                f"{cost.slice_name(found.name, n)} ({'TensorCores, two per chip' if found.name in ('v5p', 'v4') else 'chips'})"
                if cost.slice_name(found.name, n)
                else "in its own way"
            )
            + "; you need Cloud TPU quota for them (per project, region and version; on-demand "
            "and preemptible/spot counted apart: https://cloud.google.com/tpu/docs/quota)"
        )
    threshold, torus = None, None
    if batch is not None and found.kind == "tpu" and found.ici_link_bandwidth:
        threshold, torus = _communication_threshold(found, n, gb if gb > 0 else pb or 2)
        if threshold is not None:
            assumptions.append(
                f"communication: the gradients ({gb if gb > 0 else pb or 2:g} bytes each) are summed over all {n} chips "
                f"({'x'.join(map(str, torus))} torus) while the backward pass runs; compute hides that above "
                f"{threshold:,.0f} tokens per chip (the scaling book's C / W, training.md, 'Data Parallelism'; "
                "FSDP's all-gathers and reduce-scatter carry the same bytes per FLOP in each pass, so the same threshold). Latency, overlap limits and "
                "the other axes' traffic are not counted"
            )
    return Plan(
        params,
        tokens,
        found.name,
        found.label,
        n,
        float(mfu),
        region,
        found.peak_flops,
        memory,
        price_od,
        cost_spot,
        basis,
        assumptions,
        unit,
        batch,
        seq_len if batch is not None else None,
        threshold,
    )


def _communication_threshold(chip: Any, chips: int, grad_bytes: float) -> tuple[float | None, tuple[int, ...] | None]:
    """Tokens per chip above which the gradient sum hides behind compute, on the standard torus of
    ``chips`` chips; (None, None) when the chip table has no torus of that many chips."""
    from . import hardware, mesh

    shape = hardware.standard_shape(chip.name, chips)
    if shape is None:
        return None, None
    return mesh.data_parallel_threshold(chip, shape, wraparound=chip.wraparound(shape), grad_bytes=grad_bytes), shape


# ----------------------------------------------------------------- reviewing a request


@dataclass(frozen=True)
class Finding:
    """One problem with a TPU request: how bad, what, and how to fix it."""

    level: str  # "error" (will fail or lose work) | "warning" (works, but costs or exposes) | "note" (needs setup elsewhere)
    check: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.level.upper():<8}{self.check}: {self.message}. Fix: {self.fix}"


_LEVELS = {"error": 0, "warning": 1, "note": 2}
_CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
QUOTA_PAGE = "https://cloud.google.com/tpu/docs/quota"


def _get(node: Any, *path: str, default: Any = None) -> Any:
    """Read ``node.a.b`` from a tpu_v2 message (snake_case) or its REST JSON dict (camelCase)."""
    cur = node
    for key in path:
        if cur is None:
            return default
        if isinstance(cur, dict):
            camel = key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:])
            cur = cur.get(key, cur.get(camel))
        else:
            cur = getattr(cur, key, None)
    return default if cur is None else cur


def _is_set(message: Any, field: str) -> bool:
    """Whether a oneof/message field is present (``spot`` on a QueuedResource is an empty message)."""
    if isinstance(message, dict):
        return field in message
    try:
        return field in message  # proto-plus: `"spot" in qr` tells presence
    except TypeError:
        return getattr(message, field, None) is not None


def _default_account(email: str) -> bool:
    return not email or email == "default" or email.endswith("-compute@developer.gserviceaccount.com")


def review(node: Any, zone: str, *, checkpoint_uri: str | None = None) -> list[Finding]:
    """The classic mistakes in a request to create ``node`` in ``zone``: errors, then warnings, then notes.

    ``node`` is a ``tpu_v2.Node``, a ``tpu_v2.QueuedResource`` (its first node spec is reviewed,
    and its spot tier counts as spot), or their REST JSON; ``checkpoint_uri`` is where the job you
    will run on it writes checkpoints (``gs://...``), or None if it writes none.
    """
    from .hardware import offered_types, zones_table
    from .runtime import parse_accelerator_type

    found: list[Finding] = []
    queued_spot = False
    specs = _get(node, "tpu", "node_spec")
    if specs:  # a QueuedResource: review its node, with the queue's tier
        queued_spot = _is_set(node, "spot")
        node = _get(list(specs)[0], "node", default={})
    accel = _get(node, "accelerator_type", default="")
    parsed = parse_accelerator_type(accel) if accel else None
    zones = {r["zone"] for r in zones_table()}
    if parsed and parsed[0] == "7x":
        found.append(
            Finding(
                "error",
                "api",
                f"{accel} is TPU7x, which the Cloud TPU API does not serve",
                "create TPU7x through Compute Engine or a GKE node pool",
            )
        )
    elif not parsed:
        found.append(
            Finding(
                "error",
                "accelerator type",
                f"{accel!r} is not a TPU accelerator type",
                "use a name like v5litepod-8, v6e-8 or v5p-8",
            )
        )
    elif zone not in zones:
        found.append(
            Finding(
                "warning",
                "zone",
                f"zone {zone!r} is not in tpututor's zone table, so {accel} could not be checked",
                f"gcloud compute tpus accelerator-types list --zone={zone}",
            )
        )
    elif accel not in offered_types(zone):
        have = sorted({r["generation"] for r in zones_table() if r["zone"] == zone})
        where = sorted({r["zone"] for r in zones_table() if r["generation"] == parsed[0]})
        found.append(
            Finding(
                "error",
                "zone",
                f"{accel} is not offered in {zone} (it offers {', '.join(have)}, "
                "per tpututor's table, which leaves out zones Google lists for single-tenant use only)",
                f"use a zone that offers {parsed[0]}: {', '.join(where) or 'none in the table'}; "
                f"confirm with gcloud compute tpus accelerator-types list --zone=ZONE",
            )
        )
    spot = (
        queued_spot
        or bool(_get(node, "scheduling_config", "spot"))
        or bool(_get(node, "scheduling_config", "preemptible"))
    )
    if spot and not checkpoint_uri:
        found.append(
            Finding(
                "error",
                "spot",
                "a spot VM can be taken back at any time and this job writes no "
                "checkpoint, so a preemption loses all progress",
                "checkpoint to a bucket (Orbax CheckpointManager to gs://...) and resume from "
                "the latest step, or drop --spot",
            )
        )
    elif spot and not str(checkpoint_uri).startswith("gs://"):
        found.append(
            Finding(
                "warning",
                "spot",
                f"checkpoints go to {checkpoint_uri}, on the VM: a preempted VM loses its disk",
                "write checkpoints to a Cloud Storage bucket (gs://...)",
            )
        )
    external = _get(node, "network_config", "enable_external_ips")
    if external is True:
        found.append(
            Finding(
                "warning",
                "external IP",
                "the VM gets a public IP address",
                "create it with --internal-ips (network_config.enable_external_ips=False) and reach it through IAP",
            )
        )
    email = _get(node, "service_account", "email", default="")
    scopes = list(_get(node, "service_account", "scope", default=[]) or [])
    if _default_account(email):
        found.append(
            Finding(
                "warning",
                "service account",
                "the VM runs as the default compute service account",
                "attach a dedicated service account holding only the roles the job needs "
                "(--service-account=...; you need roles/iam.serviceAccountUser on it to attach it)",
            )
        )
        if _CLOUD_PLATFORM in scopes or not scopes:
            found.append(
                Finding(
                    "warning",
                    "scopes",
                    "the default account with "
                    + (
                        "the cloud-platform scope"
                        if scopes
                        else "no scope listed (the API then allows every Cloud API)"
                    )
                    + " can call every API its roles allow",
                    "use a dedicated service account with narrow roles",
                )
            )
    metadata = _get(node, "metadata", default={}) or {}
    if str(dict(metadata).get("enable-oslogin", "")).upper() != "TRUE":
        found.append(
            Finding(
                "warning",
                "OS Login",
                "SSH keys are managed in metadata, not by IAM",
                "set metadata enable-oslogin=TRUE (--metadata=enable-oslogin=TRUE)",
            )
        )
    if not _get(node, "shielded_instance_config", "enable_secure_boot"):
        found.append(
            Finding(
                "warning",
                "secure boot",
                "the VM boots without Shielded VM secure boot",
                "create it with --shielded-secure-boot (shielded_instance_config.enable_secure_boot=True)",
            )
        )
    if external is not True:
        found.append(
            Finding(
                "note",
                "no external IP",
                "without external IPs the subnetwork needs Private Google "
                "Access to reach gs:// and other Google APIs, and a Cloud NAT gateway for pip, "
                "Hugging Face or anything else on the internet",
                "gcloud compute networks subnets update SUBNET --region=REGION "
                "--enable-private-ip-google-access; create a Cloud Router and a NAT gateway in the region",
            )
        )
    if spot and parsed:
        found.append(
            Finding(
                "note",
                "quota",
                f"spot {accel} draws on the project's preemptible {parsed[0]} quota "
                f"in this region, separate from on-demand quota",
                f"check it (IAM & Admin > Quotas, service Cloud TPU API) and ask for more before "
                f"you queue: {QUOTA_PAGE}",
            )
        )
    return sorted(found, key=lambda f: _LEVELS[f.level])


@dataclass(frozen=True)
class Forgotten:
    """A VM that is READY and was created longer ago than it should be, and what it may have cost.

    ``hours`` counts from the node's ``create_time`` (the v2 API gives no last-start time), so for
    a node stopped and started again it overstates the billed hours; ``cost_usd`` is that many
    hours at the list price of the node's own region (None where the table has no price).
    """

    name: str
    accelerator_type: str
    hours: float
    cost_usd: float | None
    basis: str
    region: str = ""


def _created(node: Any) -> datetime:
    value = _get(node, "create_time")
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if not isinstance(value, datetime):
        raise ValueError(f"{_get(node, 'name')!r} has no create_time")
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def forgotten(
    nodes: Iterable[Any],
    now: datetime,
    *,
    max_hours: float = 12.0,
    fallback_region: str | None = None,
    keep_label: str = "keep",
) -> list[Forgotten]:
    """READY nodes created more than ``max_hours`` ago and not labelled ``keep_label=true``, oldest first.

    Each is priced in the region of its own zone (from its name, ``projects/*/locations/<zone>/...``);
    where the price table has no row there, at ``fallback_region`` if given (the basis says so),
    else not at all.
    """
    from . import cost

    if not (isinstance(max_hours, (int, float)) and not isinstance(max_hours, bool) and max_hours >= 0):
        raise ValueError(f"max_hours must be a non-negative number of hours, got {max_hours!r}")
    out = []
    for node in nodes:
        state = _get(node, "state")
        state = getattr(state, "name", state)
        labels = dict(_get(node, "labels", default={}) or {})
        if state != "READY" or labels.get(keep_label) == "true":
            continue
        hours = (now - _created(node)).total_seconds() / 3600
        if hours <= max_hours:
            continue
        accel = _get(node, "accelerator_type", default="")
        name = _get(node, "name", default="")
        spot = bool(_get(node, "scheduling_config", "spot"))
        try:
            region = cost.region_of(name)
        except ValueError:
            region = ""
        total, basis = None, f"no zone in the node's name {name!r}, so no region to price it in"
        for where in [r for r in (region, fallback_region) if r]:
            try:
                est = cost.estimate(accel, hours=hours, region=where, spot=spot)
            except ValueError as err:
                basis = str(err)
                continue
            total, basis = est.total, est.basis
            if where != region:
                basis = f"no {region or 'zone'} price in tpututor's table; priced at {where}: {basis}"
            break
        out.append(Forgotten(name, accel, hours, total, basis, region))
    return sorted(out, key=lambda f: -f.hours)


# ----------------------------------------------------------------- checking a plan with the TPU compiler

COMPILE_VOCAB = 32_000  # the model --compile builds when no --vocab is given (LLaMA 2's vocabulary size)
COMPILE_SEQ_LEN = 1024
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}  # XLA prints sizes in binary units: 15.75G


def gib_text(n: float) -> str:
    """Bytes as GiB the way the compile check prints them: 2 decimals from 1 GiB, else 3 significant
    digits, and 0.000 under a MiB."""
    v = n / GIB
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3g}" if abs(v) >= 2**-10 else f"{v:.3f}"


class CompilerUnavailable(RuntimeError):
    """No TPU compiler here (no JAX, no libtpu, or a pairing that cannot compile); the text says why."""


def gated_width(d_model: int, multiple: int = 128) -> int:
    """A gated MLP's width for ``d_model``: about 8 d / 3 (three matrices then hold 8 d^2, as a plain MLP
    of 4 d does with two), rounded to a multiple of ``multiple`` (LLaMA's rule: 4096 -> 11008 = 2.69 d)."""
    return max(multiple, round(8 * d_model / 3 / multiple) * multiple)


def lm_shape(
    params: float,
    *,
    layers: int | None = None,
    d_model: int | None = None,
    vocab: int = COMPILE_VOCAB,
    seq_len: int = COMPILE_SEQ_LEN,
    multiple: int = 128,
) -> tuple[int, int, str | None]:
    """(layers, d_model, assumption) of a :mod:`tpututor.lm` Transformer of about ``params`` parameters.

    The model is lm's (the Llama layout): per layer about 12 x d_model^2 (attention 4 d^2 with as many
    key/value heads as query heads, a gated MLP of three d x d_ff matrices with d_ff about 8 d / 3:
    8 d^2; :func:`gated_width`) and untied input and output embeddings (2 x vocab x d_model); RoPE
    has no position table.
    What is not given is derived: depth from a width of about 128 x depth (GPT-3's and LLaMA's aspect:
    4096 wide, 32 deep at 8B), width rounded to a multiple of ``multiple`` (128, or the devices FSDP
    splits it over). ``assumption`` says what was derived (None when both were given).
    """
    if layers is not None and d_model is not None:
        return layers, d_model, None
    embed = 2 * vocab + 1  # d_model times this many: the two embeddings and the final norm
    derived = []
    if layers is None and d_model is None:
        layers = max(1, round((params / (12 * 128**2)) ** (1 / 3)))
        derived.append(f"{layers} layers (width about 128 x depth)")
    if d_model is None:
        a, b = 12 * layers, embed + 2 * layers  # 12 L d^2 + (embed + 2 L) d = params
        d = (-b + math.sqrt(b * b + 4 * a * params)) / (2 * a)
        d_model = max(multiple, round(d / multiple) * multiple)
        derived.append(f"d_model {d_model} (a multiple of {multiple})")
    else:
        layers = max(1, round((params - embed * d_model) / (12 * d_model**2 + 2 * d_model)))
        derived.append(f"{layers} layers")
    return layers, d_model, " and ".join(derived)


def largest_allocations(message: str, top: int = 5) -> list[str]:
    """The compiler's own list of its largest HBM allocations, when its out-of-memory message has one.

    XLA:TPU's longer report reads ``Largest program allocations in hbm: 1. Size: 512.00M / Operator:
    ... / Shape: f32[...] / ... / Allocation type: HLO temp``; the short one (``the total memory required
    for HLO temporaries (22.53G) exceeds available HBM (15.75G)``) lists none, and this returns [].
    """
    found = []
    for block in re.split(r"\n\s*(?=\d+\.\s+Size:)", message)[1:]:
        size = re.match(r"(\d+)\.\s+Size:\s*(\S+)", block)
        shape = re.search(r"Shape:\s*(\S+)", block)
        op = re.search(r"Operator:\s*(.*)", block)
        kind = re.search(r"Allocation type:\s*(.*)", block)
        if not size:
            continue
        line = f"{size.group(1)}. {size.group(2)} {shape.group(1) if shape else '?'}"
        if kind:
            line += f" ({kind.group(1).strip()})"
        if op:
            line += f" {op.group(1).strip()}"
        found.append(line)
    return found[:top]


def compiler_figures(message: str) -> tuple[float | None, float | None]:
    """(bytes needed, bytes available) per device as the compiler's out-of-memory message gives them."""
    for pattern in (
        r"required for HLO temporaries \(([\d.]+)([KMGT]?)\) exceeds available HBM \(([\d.]+)([KMGT]?)\)",
        r"Used ([\d.]+)([KMGT]?) of ([\d.]+)([KMGT]?) hbm",
    ):
        m = re.search(pattern, message)
        if m:
            return float(m.group(1)) * _UNITS[m.group(2)], float(m.group(3)) * _UNITS[m.group(4)]
    return None, None


def biggest_buffers(hlo_text: str, top: int = 5, *, arguments: bool = True) -> list[tuple[str, int, str]]:
    """(shape, bytes, what) of the biggest arrays a program holds, largest first, from its HLO text.

    Tuples and the ops that only rename a buffer (get-tuple-element, bitcast) are skipped; ``what`` is
    the instruction's ``op_name`` metadata when it has one (the JAX operation that made it), else its opcode.
    """
    from . import hlo

    module = hlo.parse(hlo_text)
    seen, out = set(), []
    for comp in module.computations.values():
        if not comp.entry and any(c.entry for c in module.computations.values()) and "fused" in comp.name:
            continue  # inside a fusion: values live in vector registers and VMEM, not HBM
        for ins in comp.instructions:
            if ins.shape.startswith("(") or ins.opcode in ("tuple", "get-tuple-element", "bitcast", "constant"):
                continue
            size = hlo.shape_bytes(ins.shape)
            name = re.search(r'op_name="([^"]+)"', ins.text)
            what = name.group(1).split("/")[-1] if name else ins.opcode
            if ins.opcode == "parameter":
                if not arguments:
                    continue
                what = "argument"
            key = (ins.shape.split("{")[0], what)
            if size and key not in seen:
                seen.add(key)
                out.append((ins.shape.split("{")[0], size, what))
    return sorted(out, key=lambda t: -t[1])[:top]


@dataclass(frozen=True)
class CompileCheck:
    """What the TPU compiler says of a planned run's real train step on a slice: memory per device, fit."""

    slice_name: str
    describe: str  # the slice: chips, hosts, devices
    per: str  # "chip", or "device" where a chip is several JAX devices
    model: dict[str, Any]  # the tpututor.lm Config compiled
    model_params: int
    batch: int
    remat: str
    formula_bytes: float  # FSDP state per device: 16 bytes per parameter / devices
    hbm_bytes: float  # per device, from the chip table
    compiler_bytes: float | None  # bytes_per_device of the compiled program, or the figure in the refusal
    compiler_hbm_bytes: float | None  # the HBM the compiler's refusal says it had (it keeps some for itself)
    memory: dict[str, int]  # the compiler's memory analysis (empty when it refused)
    fits: bool
    message: str | None  # the compiler's refusal, when it refused
    largest: list[str]  # lines naming the largest allocations (not fitting only)
    largest_source: str
    seconds: float
    compiler: str
    assumptions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        m, cfg = self.memory, self.model
        lines = [
            f"TPU compiler check: {self.describe} ({self.compiler}; compiled here for the slice, nothing ran)",
            f"  model    tpututor.lm Transformer: {cfg['n_layers']} layer{'s' if cfg['n_layers'] > 1 else ''} "
            f"x d_model {cfg['d_model']} "
            f"({cfg['n_heads']} heads, d_ff {cfg['d_ff']}), vocab {cfg['vocab']}, seq_len {cfg['seq_len']}: "
            f"{self.model_params:,} parameters",
            f"  step     lm.train_step (AdamW; f32 weights, gradients and moments), FSDP over the slice's "
            f"devices, global batch {self.batch} x {cfg['seq_len']} tokens, remat {self.remat}, old state donated",
            f"  {'memory per ' + self.per + ' (GiB)':<38}{'formula':>9}{'compiler':>10}",
            f"    {'state: weights, gradients, Adam':<36}{gib_text(self.formula_bytes):>9}",
        ]
        if m:
            lines += [
                f"    {'arguments (state and batch)':<36}{'':>9}{gib_text(m.get('argument_size', 0)):>10}",
                f"    {'temporaries (gradients, activations)':<36}{'':>9}{gib_text(m.get('temp_size', 0)):>10}",
                f"    {'outputs less those aliased to inputs':<36}{'':>9}"
                f"{gib_text(m.get('output_size', 0) - m.get('alias_size', 0)):>10}",
            ]
        needed = "-" if self.compiler_bytes is None else gib_text(self.compiler_bytes)
        lines += [
            f"    {'total':<36}{gib_text(self.formula_bytes):>9}{needed:>10}",
            f"    {'HBM':<36}{gib_text(self.hbm_bytes):>9}{gib_text(self.compiler_hbm_bytes or self.hbm_bytes):>10}",
        ]
        if self.fits:
            lines.append(
                f"  {self.slice_name}: fits: the TPU compiler needs {needed} GiB per {self.per} of "
                f"{gib_text(self.hbm_bytes)} GiB HBM (the formula's state alone: "
                f"{gib_text(self.formula_bytes)} "
                f"GiB); compiled in {self.seconds:.1f} s here"
            )
        else:
            why = (
                f"the TPU compiler refused it: {self.message.strip().splitlines()[0][:300]}"
                if self.message
                else f"the TPU compiler needs {needed} GiB per {self.per} of {gib_text(self.hbm_bytes)} GiB HBM"
            )
            lines.append(f"  {self.slice_name}: does NOT fit: {why}")
            lines.append(f"  largest allocations ({self.largest_source}):")
            lines += [f"    {line}" for line in self.largest] or ["    (none found)"]
        lines += ["  assumptions:"] + [f"    - {a}" for a in self.assumptions]
        return "\n".join(lines)


def compile_check(
    p: Plan,
    slice_name: str,
    *,
    layers: int | None = None,
    d_model: int | None = None,
    d_ff: int | None = None,
    heads: int | None = None,
    vocab: int = COMPILE_VOCAB,
    seq_len: int = COMPILE_SEQ_LEN,
    batch: int | None = None,
    remat: str = "none",
) -> CompileCheck:
    """Compile the planned model's real train step for ``slice_name`` with the TPU compiler (libtpu).

    The model is :mod:`tpututor.lm`'s Transformer at the plan's size (:func:`lm_shape` derives what is
    not given), as abstract arrays (``jax.eval_shape``: nothing is allocated); the step is
    ``lm.make_train_step`` with the state split over every device of the slice (FSDP: mesh
    ``fsdp=devices``), ``batch`` sequences of ``seq_len`` tokens (default one per device). Raises
    :class:`CompilerUnavailable` (why, in one line) where no TPU compiler is here, and ``ValueError``
    for a slice that is not the plan's chips or a shape the mesh cannot split.
    """
    from . import hardware, lm
    from .runtime import dist_version

    spec = hardware.slice_of(slice_name)
    if p.unit != "chip" or spec.chip.name != p.chip or spec.chips != p.chips:
        mine = p.slice_name or f"{p.chips} {p.chip}"
        raise ValueError(
            f"--compile {slice_name} is {spec.chips} {spec.chip.name} chips, but the plan is for "
            f"{p.chips} {p.chip} {p.unit}s: compile the plan's own slice"
            + (f" (--compile {mine})" if p.slice_name else "")
            + f" or plan for it (--chip {spec.chip.name} --chips {spec.chips})"
        )
    try:
        from . import aot
    except ImportError as exc:  # no JAX here
        raise CompilerUnavailable(f"the TPU compiler needs JAX and libtpu, and this Python has none ({exc})") from exc
    why = aot.available()
    if why is not None:
        raise CompilerUnavailable(why)
    import jax
    import jax.numpy as jnp

    devices = spec.devices
    assumptions = []
    n_layers, width, derived = lm_shape(
        p.params, layers=layers, d_model=d_model, vocab=vocab, seq_len=seq_len, multiple=math.lcm(128, devices)
    )
    if derived:
        assumptions.append(
            f"no model shape given (--layers, --d-model): derived {derived} for about "
            f"{p.params:.3g} parameters in tpututor.lm's layout (about 12 x d_model^2 per layer, "
            "untied embeddings); pass --layers and --d-model for your model's"
        )
    heads = heads or (width // 128 if width % 128 == 0 else width // 64 if width % 64 == 0 else 1)
    cfg = lm.Config(
        d_model=width, n_layers=n_layers, n_heads=heads, d_ff=d_ff or gated_width(width), seq_len=seq_len, vocab=vocab
    )
    batch = batch or devices
    n = cfg.n_params()
    if abs(n - p.params) > 0.05 * p.params:
        assumptions.append(
            f"the model built has {n:,} parameters where --params says {p.params:.3g}: the "
            "formula beside the compiler's figure counts the model built"
        )
    formula = plan(n, p.tokens, p.chip, p.chips, p.mfu, region=p.region, price_per_chip_hour=1.0)
    per_device = spec.chip.jax_devices_per_chip
    formula_bytes = formula.memory["FSDP"].total_bytes / per_device
    hbm = (spec.chip.hbm_bytes or 0) / per_device
    per = "chip" if per_device == 1 else "device"
    assumptions += [
        "formula: 16 bytes per parameter (f32 weights and gradients, Adam's two f32 moments) split over "
        f"{devices} devices, as lm.train_step keeps them; the compiler's figure adds activations, temporaries "
        "and the batch (--param-bytes, --grad-bytes and --optimizer-bytes change only the plan above)",
        f"{per_device} JAX devices per {spec.chip.name} chip: figures per device, HBM {hbm / GIB:.2f} GiB each"
        if per_device > 1
        else f"HBM per chip {hbm / GIB:.2f} GiB from the chip table "
        f"({spec.chip.source_date}); the compiler may keep some for itself",
        f"{batch} sequences of {seq_len} tokens per step (--batch, --seq-len); attention is "
        "jax.nn.dot_product_attention as XLA writes it out, whose scores grow with seq_len^2",
    ]
    tx = lm.optimizer()
    mesh = lm.make_mesh(data=1, fsdp=devices, tensor=1, devices=aot.topology(slice_name).devices)
    abstract = lm.abstract_state(cfg, tx)  # jax.eval_shape: shapes and dtypes only
    try:
        lm.check_batch(batch, mesh)
        state_sh = lm.shardings(abstract, lm.RULES, mesh)
    except lm.ShardingRuleError as exc:
        raise ValueError(str(exc)) from exc
    state = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, state_sh)
    tokens = jax.ShapeDtypeStruct((batch, seq_len), jnp.int32, sharding=lm.batch_sharding(mesh))
    step = lm.make_train_step(cfg, tx, mesh, remat=remat, abstract=abstract)
    compiler = f"libtpu {dist_version('libtpu') or '?'}, JAX {jax.__version__}"
    common = dict(
        slice_name=slice_name,
        describe=spec.describe(),
        per=per,
        model=cfg.to_dict(),
        model_params=n,
        batch=batch,
        remat=remat,
        formula_bytes=formula_bytes,
        hbm_bytes=hbm,
        compiler=compiler,
        assumptions=assumptions,
    )
    start = time.perf_counter()
    try:
        out = aot.compile(step, state, {"inputs": tokens, "targets": tokens}, slice=slice_name)
    except aot.CompileError as err:
        needed, available = compiler_figures(err.message)
        listed = largest_allocations(err.message)
        source = "the compiler's message"
        if not listed:
            listed = _largest_without_a_list(state, step.lower(state, {"inputs": tokens, "targets": tokens}), devices)
            source = (
                "the compiler's message lists none: the state's shards per device, then the biggest "
                f"values in the program before the compiler splits it over {devices} devices"
            )
        return CompileCheck(
            compiler_bytes=needed,
            compiler_hbm_bytes=available,
            memory={},
            fits=False,
            message=err.message,
            largest=listed,
            largest_source=source,
            seconds=time.perf_counter() - start,
            **common,
        )
    listed, source = [], ""
    if not out.fits:
        listed = [f"{shape} {gib_text(size)} GiB ({what})" for shape, size, what in biggest_buffers(out.hlo)]
        source = "the biggest buffers in the compiled program, per device"
    return CompileCheck(
        compiler_bytes=out.bytes_per_device,
        compiler_hbm_bytes=None,
        memory=dict(out.memory),
        fits=out.fits,
        message=None,
        largest=listed,
        largest_source=source,
        seconds=out.seconds,
        **common,
    )


def _largest_without_a_list(state, lowered, devices: int, top: int = 4) -> list[str]:
    """Lines naming the biggest state shards per device and the biggest values of the unsplit program."""
    import jax
    import numpy as np

    shards: dict[tuple, list] = {}  # a weight and its Adam moments (same path tail, same shard) together
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        shard = leaf.sharding.shard_shape(leaf.shape)
        size = int(np.prod(shard, dtype=np.int64)) * leaf.dtype.itemsize
        name = "/".join(str(next((getattr(k, a) for a in ("key", "idx", "name") if hasattr(k, a)), k)) for k in path)
        moment = re.match(r"^(params|opt_state/.*?/(mu|nu))/", name)
        tail = name[moment.end() :] if moment else name
        key = (tail, leaf.dtype.name, tuple(shard), tuple(leaf.shape), size)
        shards.setdefault(key, []).append(moment.group(2) or "weights" if moment else name)
    lines = []
    biggest = sorted(shards.items(), key=lambda kv: -kv[0][4] * len(kv[1]))[:top]
    for (tail, dtype, shard, shape, size), kinds in biggest:
        kinds = sorted(kinds, key=lambda k: k != "weights")
        lines.append(
            f"state {tail}: {dtype}{list(shard)} of {list(shape)} = {gib_text(size)} GiB per device"
            + (f" x {len(kinds)} ({', '.join(kinds)})" if len(kinds) > 1 else f" ({kinds[0]})")
        )
    for shape, size, what in biggest_buffers(lowered.as_text(dialect="hlo"), top, arguments=False):
        lines.append(f"program {shape} ({what}) = {gib_text(size)} GiB whole, before splitting over {devices}")
    return lines
