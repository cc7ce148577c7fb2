"""A served model's sizes from its shapes alone: bytes, FLOPs, the batch that fits, the least step time.

Plain arithmetic on a config (``lm.Config``: d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff,
vocab), no arrays and no framework, for lesson 09a (inference and serving), section 1:

* :func:`kv_bytes_per_token`, :func:`weight_bytes`, :func:`params_bytes`, :func:`memory_bytes`: what a
  step reads and what HBM holds; :func:`max_batch`: the most sequences that fit beside the weights;
* :func:`decode_cost` and :func:`prefill_cost`: a step's FLOPs and bytes (a :class:`Cost`, the
  textbook minimum, every weight and cache entry read once);
* :func:`min_step_seconds`: scaling-book's least decode step time; :func:`critical_batch`: the batch
  from which a decode step's matmuls are compute-bound, from the chip table.

(The money a run costs is :mod:`tpututor.cost`'s and the serving planner's, :mod:`tpututor.serving.planner`.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import hardware, mfu, roofline
from ..validate import positive_ints

__all__ = [
    "Cost",
    "key_value_heads",
    "kv_bytes_per_token",
    "matmul_weights",
    "weight_bytes",
    "params_bytes",
    "memory_bytes",
    "max_batch",
    "decode_cost",
    "prefill_cost",
    "min_step_seconds",
    "critical_batch",
]

# --------------------------------------------------------------------------- costs (from the shapes)


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes of one step, read as the textbook minimum (every weight and cache entry read once)."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def key_value_heads(cfg: Any, kv_heads: int | None = None) -> int:
    """The number of key/value heads: the config's own (``n_kv_heads``; ``n_heads`` for a config without
    one, multi-head attention) unless given (GQA, MQA)."""
    if kv_heads is None:
        return getattr(cfg, "n_kv_heads", None) or cfg.n_heads
    if not isinstance(kv_heads, int) or isinstance(kv_heads, bool) or kv_heads < 1 or cfg.n_heads % kv_heads:
        raise ValueError(
            f"kv_heads must be a positive integer dividing n_heads={cfg.n_heads} (grouped-query "
            f"attention shares each key/value head among n_heads // kv_heads query heads), got {kv_heads!r}"
        )
    return kv_heads


def kv_bytes_per_token(cfg: Any, kv_bytes: int = 2, *, kv_heads: int | None = None) -> int:
    """Bytes of cache one token takes: keys and values (2) x layers x kv_heads x head_dim x bytes per number.

    ``kv_heads`` defaults to the config's ``n_kv_heads``; multi-head attention keeps one per query
    head, grouped-query attention (GQA) fewer, multi-query (MQA) one.
    """
    return 2 * cfg.n_layers * key_value_heads(cfg, kv_heads) * cfg.head_dim * kv_bytes


def matmul_weights(cfg: Any, *, kv_heads: int | None = None) -> int:
    """The matmul weights (``mfu.matmul_params``), with the key and value projections resized for ``kv_heads``."""
    fewer = key_value_heads(cfg, None) - key_value_heads(cfg, kv_heads)
    return mfu.matmul_params(cfg) - 2 * cfg.n_layers * cfg.d_model * fewer * cfg.head_dim


def weight_bytes(cfg: Any, bytes_per_weight: float = 2, *, kv_heads: int | None = None) -> float:
    """Bytes of the weights a step reads: the matmul weights (:func:`matmul_weights`) at ``bytes_per_weight``.

    The embedding tables are not read whole (one row per token), so they are left out.
    """
    return matmul_weights(cfg, kv_heads=kv_heads) * bytes_per_weight


def params_bytes(cfg: Any, bytes_per_weight: float = 2, *, kv_heads: int | None = None) -> float:
    """Bytes the weights hold in HBM: every parameter (embeddings too, read or not) at ``bytes_per_weight``."""
    return (cfg.n_params() - (mfu.matmul_params(cfg) - matmul_weights(cfg, kv_heads=kv_heads))) * bytes_per_weight


def memory_bytes(
    cfg: Any, batch: int, context: int, *, bytes_per_weight: float = 2, kv_bytes: int = 2, kv_heads: int | None = None
) -> float:
    """HBM a decode batch holds: the weights (:func:`params_bytes`) plus ``batch`` caches of ``context`` tokens.

    Activations are left out: at decode they are a few rows per layer (scaling-book, inference chapter).
    """
    positive_ints(batch=batch, context=context)
    return params_bytes(cfg, bytes_per_weight, kv_heads=kv_heads) + batch * context * kv_bytes_per_token(
        cfg, kv_bytes, kv_heads=kv_heads
    )


def max_batch(
    cfg: Any,
    context: int,
    chip: str | hardware.Chip = "v5e",
    *,
    chips: int = 1,
    bytes_per_weight: float = 2,
    kv_bytes: int = 2,
    kv_heads: int | None = None,
    hbm_bytes: float | None = None,
) -> int:
    """The most sequences of ``context`` tokens whose caches fit beside the weights in the HBM of ``chips`` chips.

    0 when the weights alone do not fit. ``hbm_bytes`` overrides the chip table's capacity (per
    chip), for a chip whose usable memory is less than its nominal one. Scaling-book's LLaMA-2-13B
    on eight v5e chips at 8192 tokens: 16 ("We OOM beyond batch size 16").
    """
    positive_ints(context=context, chips=chips)
    if hbm_bytes is None:
        chip = hardware.lookup(chip) if isinstance(chip, str) else chip
        if not chip.hbm_bytes:
            raise ValueError(f"the chip table has no HBM capacity for {chip.label}: pass hbm_bytes=")
        hbm_bytes = chip.hbm_bytes
    if hbm_bytes <= 0:
        raise ValueError(f"hbm_bytes must be positive, got {hbm_bytes!r}")
    left = chips * hbm_bytes - params_bytes(cfg, bytes_per_weight, kv_heads=kv_heads)
    per_sequence = context * kv_bytes_per_token(cfg, kv_bytes, kv_heads=kv_heads)
    return max(0, int(left // per_sequence))


def decode_cost(
    cfg: Any, batch: int, context: int, *, bytes_per_weight: float = 2, kv_bytes: int = 2, kv_heads: int | None = None
) -> Cost:
    """One decode step: ``batch`` new tokens, each attending to ``context`` cached tokens.

    FLOPs: 2 per weight per token (2·N·B) and attention's two products (4·L·d·S per token, the
    same for GQA: every query head still meets every cached position). Bytes: every weight once,
    plus each sequence's cache of ``context`` tokens.
    """
    positive_ints(batch=batch, context=context)
    flops = 2 * matmul_weights(cfg, kv_heads=kv_heads) * batch + 4 * cfg.n_layers * cfg.d_model * context * batch
    nbytes = weight_bytes(cfg, bytes_per_weight, kv_heads=kv_heads) + batch * context * kv_bytes_per_token(
        cfg, kv_bytes, kv_heads=kv_heads
    )
    return Cost(float(flops), float(nbytes))


def prefill_cost(
    cfg: Any, batch: int, tokens: int, *, bytes_per_weight: float = 2, kv_bytes: int = 2, kv_heads: int | None = None
) -> Cost:
    """One prefill: ``batch`` prompts of ``tokens`` tokens, causal attention (half the score matrix).

    FLOPs: 2·N per token and 4·L·d·T²/2 per prompt for attention. Bytes: every weight once, plus
    the cache written for every prompt token.
    """
    positive_ints(batch=batch, tokens=tokens)
    flops = (
        2 * matmul_weights(cfg, kv_heads=kv_heads) * batch * tokens
        + 2 * cfg.n_layers * cfg.d_model * tokens * tokens * batch
    )
    nbytes = weight_bytes(cfg, bytes_per_weight, kv_heads=kv_heads) + batch * tokens * kv_bytes_per_token(
        cfg, kv_bytes, kv_heads=kv_heads
    )
    return Cost(float(flops), float(nbytes))


def min_step_seconds(
    cfg: Any,
    batch: int,
    context: int,
    bandwidth: float,
    *,
    bytes_per_weight: float = 2,
    kv_bytes: int = 2,
    kv_heads: int | None = None,
) -> float:
    """Scaling-book's least decode step time: (batch x cache bytes + weight bytes) / memory bandwidth."""
    if not bandwidth or bandwidth <= 0:
        raise ValueError(f"bandwidth must be positive bytes/s, got {bandwidth!r}")
    return (
        decode_cost(cfg, batch, context, bytes_per_weight=bytes_per_weight, kv_bytes=kv_bytes, kv_heads=kv_heads).bytes
        / bandwidth
    )


def critical_batch(chip: str | hardware.Chip, *, bytes_per_weight: float = 2, compute: str = "bfloat16") -> float:
    """Tokens per step from which a decode step's matmuls are compute-bound on ``chip``.

    A (B, D) x (D, F) matmul does 2·B·D·F FLOPs and reads D·F weights of ``bytes_per_weight``:
    its intensity is 2·B / bytes_per_weight, which reaches the ridge (peak / bandwidth) at
    B = ridge x bytes_per_weight / 2. bf16 weights: the ridge itself (about 240 on v5e).
    """
    chip = hardware.lookup(chip) if isinstance(chip, str) else chip
    roof = roofline.Roofline.of(chip, compute)
    return roof.ridge_point * bytes_per_weight / 2
