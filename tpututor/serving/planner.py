"""Size and price a serving deployment before paying for it: scaling-book's inference arithmetic.

For a decoder model (parameters, layers, KV heads, head size, the bytes of a weight and of a cached
value), a TPU chip and a traffic shape (prompt and output lengths, a per-token latency target), the
planner tries each tensor-parallel degree ``t`` (the chips one replica spans) and reports, per chip:

* memory: the weights ``P x bytes / t`` and the KV cache, ``2 x layers x kv_heads x head_dim x bytes``
  per token, split over ``min(t, kv_heads)`` chips: a KV head cannot be split, so beyond ``kv_heads``
  chips every chip holds a whole head and the cache stops shrinking (the decode-time limit on tensor
  parallelism; sharding the cache over the batch instead needs another layout);
* the largest batch whose caches fit next to the weights, at the full sequence (prompt + output);
* a lower bound on one decode step: the larger of the HBM time (weights and caches read once) and the
  MXU time (``2 x P x batch`` FLOPs), and the ICI time of tensor parallelism's two all-reduces per layer;
* a lower bound on the time to first token (the prompt's prefill: ``2 x P x prompt`` FLOPs, or reading
  the weights once, whichever is longer; attention's own FLOPs left out);
* tokens per second per chip, and dollars per million output tokens from ``data/tpu_prices.csv``.

Every figure is a bound in the roofline's sense (no overheads, perfect overlap within each term), and
every assumption is printed with the plan. Checked against scaling-book's worked numbers for
LLaMA 3-70B on v5e ("Serving LLaMA 3-70B", applied-inference.md) in ``tests/test_serving.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import cost, hardware, mesh

__all__ = [
    "Model",
    "MODELS",
    "Traffic",
    "Option",
    "ServingPlan",
    "plan_serving",
    "model",
    "smallest_slice",
    "step_bound",
]


@dataclass(frozen=True)
class Model:
    """What sizing needs of a decoder: its parameters and the shape of its KV cache."""

    name: str
    params: float
    layers: int
    kv_heads: int
    head_dim: int
    d_model: int
    hub_id: str = ""  # the Hugging Face id a serving engine loads
    source: str = ""

    def kv_bytes_per_token(self, kv_bytes: float) -> float:
        """Bytes the cache holds per token of one sequence: keys and values, every layer and KV head."""
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes


# Shapes from each model's config.json on the Hugging Face Hub (hidden_size, num_hidden_layers,
# num_key_value_heads, head_dim = hidden_size / num_attention_heads); parameters as the model cards count them.
MODELS = {
    "llama-3.1-8b": Model(
        "Llama-3.1-8B",
        8.03e9,
        32,
        8,
        128,
        4096,
        "meta-llama/Llama-3.1-8B-Instruct",
        "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
    ),
    "llama-3-70b": Model(
        "LLaMA 3-70B",
        70e9,
        80,
        8,
        128,
        8192,
        "meta-llama/Meta-Llama-3-70B-Instruct",
        "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
    ),
    "qwen2.5-0.5b": Model(
        "Qwen2.5-0.5B",
        0.49e9,
        24,
        2,
        64,
        896,
        "Qwen/Qwen2.5-0.5B-Instruct",
        "https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json",
    ),
}


def model(name: str) -> Model:
    """A model of :data:`MODELS` by name (case-insensitive); an unknown one names the known ones."""
    found = MODELS.get(str(name).strip().lower())
    if found is None:
        raise ValueError(
            f"no model {name!r} in the serving planner; it knows {', '.join(MODELS)} "
            "(or describe yours with tpututor.serving.planner.Model)"
        )
    return found


@dataclass(frozen=True)
class Traffic:
    """The requests to serve: prompt and output tokens each, and the per-token latency to keep."""

    prompt: int
    output: int
    latency_ms: float | None = None  # per output token (time between tokens); None: no target

    @property
    def sequence(self) -> int:
        return self.prompt + self.output


@dataclass(frozen=True)
class Option:
    """One replica spanning ``chips`` chips with tensor parallelism over all of them."""

    chips: int
    weights_per_chip: float  # bytes
    cache_per_sequence_per_chip: float  # bytes, at the full sequence
    max_batch: int  # sequences whose caches fit beside the weights
    batch: int  # the batch the plan uses: the largest that fits and keeps the latency target
    step_s: float  # lower bound on one decode step at that batch
    step_terms: dict[str, float] = field(default_factory=dict)  # hbm, mxu, ici seconds
    ttft_s: float = 0.0  # lower bound on the time to first token (one prompt's prefill)
    tokens_per_s_per_chip: float = 0.0
    usd_per_mtok: float | None = None  # on demand
    usd_per_mtok_spot: float | None = None
    note: str = ""

    @property
    def fits(self) -> bool:
        return self.batch >= 1


@dataclass
class ServingPlan:
    model: Model
    chip: hardware.Chip
    traffic: Traffic
    region: str
    options: list[Option]
    chosen: Option | None
    assumptions: list[str]

    def table(self) -> str:
        head = (
            "| chips (TP) | weights/chip GiB | cache/seq/chip MiB | max batch | batch | step ms | "
            "TTFT ms | tok/s/chip | $/M tok on demand | spot |"
        )
        lines = [head, "|" + "---|" * 10]
        for o in self.options:
            mark = " **←**" if o is self.chosen else ""
            money = lambda v: "–" if v is None else f"{v:,.2f}"
            lines.append(
                f"| {o.chips}{mark} | {o.weights_per_chip / 2**30:.2f} | {o.cache_per_sequence_per_chip / 2**20:,.0f} | "
                f"{o.max_batch} | {o.batch} | {o.step_s * 1e3:.2f} | {o.ttft_s * 1e3:.1f} | "
                f"{o.tokens_per_s_per_chip:,.0f} | {money(o.usd_per_mtok)} | {money(o.usd_per_mtok_spot)} |"
            )
        return "\n".join(lines)

    def vllm_command(self) -> str | None:
        """The vLLM TPU launch for the chosen option (flags as vLLM's CLI names them)."""
        if self.chosen is None:
            return None
        return (
            f"vllm serve {self.model.hub_id or '<your model>'} --tensor-parallel-size {self.chosen.chips} "
            f"--max-model-len {self.traffic.sequence} --max-num-seqs {self.chosen.batch}"
        )

    def text(self) -> str:
        t, c = self.traffic, self.chip
        out = [
            f"Serving {self.model.name} on {c.name} ({c.hbm_gib:g} GiB HBM, {c.hbm_gbps:g} GB/s, "
            f"{c.bf16_tflops:g} bf16 TFLOP/s per chip): prompt {t.prompt}, output {t.output} tokens"
            + (f", at most {t.latency_ms:g} ms per token" if t.latency_ms else ""),
            "",
            self.table(),
            "",
        ]
        if self.chosen is None:
            out.append(
                "No option here fits and meets the latency target: use more chips, int8 weights or "
                "cache (--weight-bytes 1 --kv-bytes 1), a shorter context, or a looser target."
            )
        else:
            o = self.chosen
            out.append(
                f"Chosen: {o.chips} chip{'s' if o.chips > 1 else ''} (tensor parallelism {o.chips}), batch "
                f"{o.batch}: {o.step_s * 1e3:.2f} ms per token at best, {o.tokens_per_s_per_chip:,.0f} tokens/s "
                f"per chip"
                + (
                    f", ${o.usd_per_mtok:,.2f} per million output tokens on demand in {self.region}"
                    if o.usd_per_mtok is not None
                    else ""
                )
                + "."
            )
            found = smallest_slice(c.name, o.chips)
            if found:
                name, chips = found
                out.append(
                    f"The smallest slice that holds it is {name} ({chips} chips): "
                    + (f"{chips // o.chips} replicas of {o.chips} chips." if chips > o.chips else "one replica.")
                )
            out.append(f"vLLM TPU: {self.vllm_command()}")
        out += ["", "Assumptions:"] + [f"- {a}" for a in self.assumptions]
        return "\n".join(out)


def smallest_slice(generation: str, chips: int) -> tuple[str, int] | None:
    """The smallest slice Cloud TPU sells with at least ``chips`` chips of ``generation``: (name, chips)."""
    n = 1
    while n <= 100_000:
        if n >= chips:
            name = cost.slice_name(generation, n)
            if name is None:
                return None
            try:
                return name, hardware.slice_of(name).chips
            except ValueError:
                pass  # not a slice that is sold (a 2-chip v5e)
        n *= 2
    return None


def step_bound(
    m: Model,
    chip: hardware.Chip,
    chips: int,
    batch: int,
    sequence: int,
    *,
    weight_bytes: float = 2,
    kv_bytes: float = 2,
) -> tuple[float, dict[str, float]]:
    """A lower bound on one decode step of ``batch`` sequences of ``sequence`` tokens on ``chips`` chips
    (tensor parallelism): max of the HBM, MXU and ICI times, with the three terms."""
    cache_seq = m.kv_bytes_per_token(kv_bytes) * sequence / min(chips, m.kv_heads)
    hbm = (m.params * weight_bytes / chips + batch * cache_seq) / chip.hbm_bandwidth
    mxu = 2 * m.params * batch / (chips * chip.peak_flops)
    ici = 0.0
    if chips > 1 and chip.ici_link_bandwidth:
        activation = batch * m.d_model * 2  # bf16 activations, all-reduced twice per layer
        ici = 2 * m.layers * mesh.collective_seconds("all-reduce", activation, chips, chip, wraparound=chips >= 16)
    return max(hbm, mxu, ici), {"hbm": hbm, "mxu": mxu, "ici": ici}


def _positive(name: str, value: float, *, whole: bool = False, most: float | None = None) -> None:
    bad = (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
        or (whole and int(value) != value)
        or (most is not None and value > most)
    )
    if bad:
        kind = "a whole number" if whole else "a number"
        limit = f" and at most {most:g}" if most is not None else ""
        raise ValueError(f"{name} must be {kind} above 0{limit}, got {value!r}")


def plan_serving(
    model: Model | str,
    chip: str,
    traffic: Traffic,
    *,
    weight_bytes: float = 2,
    kv_bytes: float = 2,
    region: str = "us-central1",
    reserve: float = 0.1,
    max_chips: int = 256,
    price_per_chip_hour: float | None = None,
) -> ServingPlan:
    """Every tensor-parallel degree (powers of two up to ``max_chips``) for one replica, and the smallest
    that fits the model, the traffic and the latency target (the cheapest per token among those that do).

    ``reserve`` is the share of HBM kept for the runtime, activations and fragmentation (scaling-book's
    worked numbers use 0). Prices come from the table for ``region`` unless ``price_per_chip_hour`` is given.
    """
    m = globals()["model"](model) if isinstance(model, str) else model
    found = hardware.lookup(chip)
    if found.kind != "tpu" or not found.hbm_bytes or not found.hbm_bandwidth or not found.peak_flops:
        raise ValueError(
            f"{chip!r}: the serving planner sizes TPUs with HBM, bandwidth and bf16 figures in the chip "
            "table (v5e, v5p, v6e, 7x, ...)"
        )
    _positive("prompt", traffic.prompt, whole=True, most=10_000_000)
    _positive("output", traffic.output, whole=True, most=10_000_000)
    if traffic.latency_ms is not None:
        _positive("latency_ms", traffic.latency_ms, most=1e6)
    _positive("weight_bytes", weight_bytes, most=8)
    _positive("kv_bytes", kv_bytes, most=8)
    _positive("max_chips", max_chips, whole=True, most=100_000)
    if not 0 <= reserve < 1:
        raise ValueError(f"reserve is a share of HBM in [0, 1), got {reserve!r}")
    prices = None
    if price_per_chip_hour is None:
        try:
            prices = cost.price(found.name, region)
        except ValueError:
            prices = None
    usable = found.hbm_bytes * (1 - reserve)
    weights = m.params * weight_bytes
    per_token = m.kv_bytes_per_token(kv_bytes)
    options = []
    degrees = [2**i for i in range(int(math.log2(max_chips)) + 1)]
    for t in degrees:
        w_chip = weights / t
        cache_seq = per_token * traffic.sequence / min(t, m.kv_heads)
        max_batch = max(0, int((usable - w_chip) // cache_seq)) if usable > w_chip else 0

        def step(batch: int, t: int = t) -> tuple[float, dict[str, float]]:
            return step_bound(m, found, t, batch, traffic.sequence, weight_bytes=weight_bytes, kv_bytes=kv_bytes)

        batch = max_batch
        if traffic.latency_ms is not None and batch >= 1 and step(batch)[0] * 1e3 > traffic.latency_ms:
            lo, hi = 0, batch  # the step time grows with the batch: the largest batch within the target
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if step(mid)[0] * 1e3 <= traffic.latency_ms else (lo, mid - 1)
            batch = lo
        seconds, terms = step(max(batch, 1))
        ttft = max(2 * m.params * traffic.prompt / (t * found.peak_flops), w_chip / found.hbm_bandwidth)
        tps = batch / seconds / t if batch >= 1 else 0.0

        def per_mtok(rate: float | None, tps: float = tps) -> float | None:
            if rate is None or tps <= 0:
                return None
            return rate / (tps * 3600) * 1e6

        on_demand = (
            price_per_chip_hour if price_per_chip_hour is not None else (prices.on_demand_usd if prices else None)
        )
        spot = None if price_per_chip_hour is not None else (prices.spot_usd if prices else None)
        note = "" if t <= m.kv_heads else f"more chips than KV heads ({m.kv_heads}): the cache no longer shrinks"
        options.append(
            Option(
                t,
                w_chip,
                cache_seq,
                max_batch,
                max(batch, 0),
                seconds,
                terms,
                ttft,
                tps,
                per_mtok(on_demand),
                per_mtok(spot),
                note,
            )
        )
        if t >= 2 * m.kv_heads and options[-1].fits and len(options) >= 2 and options[-2].fits:
            break  # past the KV heads more chips only split the weights further: enough options shown
    fitting = [o for o in options if o.fits]
    chosen = fitting[0] if fitting else None
    assumptions = [
        f"weights {weight_bytes:g} bytes each ({m.params:.3g} parameters = {weights / 1e9:.1f} GB); KV cache {kv_bytes:g} "
        f"bytes per value: {per_token / 1024:,.0f} KiB per token ({m.layers} layers x {m.kv_heads} KV heads x "
        f"{m.head_dim} x 2 for keys and values)",
        f"{reserve:.0%} of each chip's {found.hbm_gib:g} GiB HBM kept for the runtime and activations",
        f"each sequence's cache held at its full length, prompt + output = {traffic.sequence} tokens",
        "one replica uses tensor parallelism over all its chips; the cache splits over at most as many chips as "
        "there are KV heads",
        "step = max(HBM time, MXU time, ICI time): a bound with no overheads, not a prediction; ICI time is two "
        f"bf16 all-reduces of the activations per layer (scaling-book's model, {hardware.lookup(found.name).ici_link_gbps} "
        "GB/s per link one way)"
        if found.ici_link_gbps
        else "step = max(HBM time, MXU time): a bound with no overheads; no ICI figure for this chip",
        "TTFT = one prompt's prefill alone: 2 x parameters x prompt FLOPs at peak, or one read of the weights",
        (
            f"price ${price_per_chip_hour:g} per chip-hour (yours)"
            if price_per_chip_hour is not None
            else f"prices per chip-hour in {region}: on demand ${prices.on_demand_usd:g}"
            + (f", spot ${prices.spot_usd:g}" if prices.spot_usd is not None else "")
            + f" ({prices.source}, read {prices.source_date})"
            if prices
            else f"no price for {found.name} in {region} in tpututor's table: dollars left out"
        ),
        f"model shapes: {m.source or 'as given'}",
    ]
    return ServingPlan(m, found, traffic, region, options, chosen, assumptions)
