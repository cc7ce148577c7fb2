"""Model FLOPs per training step and MFU (model FLOPs utilisation), as MaxText defines them.

MFU = model FLOPs per step / (measured step time x peak FLOP/s). *Model* FLOPs count the maths
the model needs, whatever the implementation does (remat's recomputation, masked-out attention
scores and elementwise work are not counted), so MFU compares runs, codebases and chips:

* every weight used in a matmul costs 6 FLOPs per token in training (2 forward, 4 backward): 6·N;
* attention's two products (scores and the weighted sum) cost 12·L·S·d per token in training,
  *halved* for causal attention, where only the scores with key <= query are needed: 6·L·S·d.

N counts the matmul weights: per layer the four attention projections (4·d²) and the MLP (2·d·d_ff),
plus the projection to the vocabulary (d·V); the token and position embeddings are lookups, not
matmuls, and norms are elementwise. Source: MaxText, docs/reference/performance_metrics.md
(https://github.com/AI-Hypercomputer/maxtext/blob/main/docs/reference/performance_metrics.md).

:func:`xla_flops` reads what the compiler counts instead (``compiled.cost_analysis()``): more
than the model FLOPs, since it counts the full attention matrix and every elementwise op.
:func:`peak` is the chip's dense bf16 peak from :mod:`tpututor.hardware`; on a CPU, which has no
datasheet row, :func:`cpu_ceiling` measures a matmul with :mod:`tpututor.bench` instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "matmul_params",
    "flops_per_token",
    "flops_per_step",
    "attention_flops_per_token",
    "xla_flops",
    "peak",
    "cpu_ceiling",
    "mfu",
    "Throughput",
    "throughput",
]


def _dims(cfg: Any) -> tuple[int, int, int, int, int]:
    try:
        dims = (cfg.d_model, cfg.n_layers, cfg.d_ff, cfg.vocab, cfg.seq_len)
    except AttributeError as err:
        raise TypeError(
            f"expected a model config with d_model, n_layers, d_ff, vocab and seq_len "
            f"(tpututor.lm.Config), got {type(cfg).__name__}"
        ) from err
    if any(not isinstance(v, int) or v < 1 for v in dims):
        raise ValueError(f"config sizes must be positive integers, got {dims}")
    return dims


def matmul_params(cfg: Any) -> int:
    """N: the weights that take part in matmuls (attention and MLP of every layer, and the vocab projection).

    Attention: q and o of d x d, k and v of d x (n_kv_heads x head_dim) when the config has fewer
    key/value heads (grouped-query attention), else d x d. MLP: ``cfg.mlp_matrices`` matrices of
    d x d_ff (3 for a gated MLP such as ``lm.Config``'s SwiGLU; 2 when the config does not say).
    """
    d, layers, ff, vocab, _ = _dims(cfg)
    kv_width = d
    if getattr(cfg, "n_kv_heads", None) and getattr(cfg, "n_heads", None):
        kv_width = cfg.n_kv_heads * (d // cfg.n_heads)
    attention = 2 * d * d + 2 * d * kv_width
    return layers * (attention + getattr(cfg, "mlp_matrices", 2) * d * ff) + d * vocab


def attention_flops_per_token(cfg: Any, *, causal: bool = True, seq_len: int | None = None) -> float:
    """Training FLOPs per token of attention's two products: 12·L·S·d, halved when causal."""
    d, layers, _, _, seq = _dims(cfg)
    seq = seq_len or seq
    full = 12 * layers * seq * d
    return full / 2 if causal else full


def flops_per_token(cfg: Any, *, causal: bool = True, seq_len: int | None = None) -> float:
    """Training (forward + backward) model FLOPs per token: 6·N + attention."""
    return 6 * matmul_params(cfg) + attention_flops_per_token(cfg, causal=causal, seq_len=seq_len)


def flops_per_step(cfg: Any, batch: int, *, causal: bool = True, seq_len: int | None = None) -> float:
    """Model FLOPs of one training step on ``batch`` sequences of ``seq_len`` (default: the config's)."""
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive number of sequences, got {batch!r}")
    seq = seq_len or _dims(cfg)[4]
    return flops_per_token(cfg, causal=causal, seq_len=seq) * batch * seq


def xla_flops(compiled: Any) -> float | None:
    """FLOPs the compiler counts for a compiled program (``cost_analysis()['flops']``), or None.

    The result is per device for a sharded program. JAX returns a dict (0.4.30 and later) or a
    one-element list of dicts (earlier); both are read. XLA counts a while loop's body once, not
    once per trip: for a model whose layers run under ``lax.scan`` (``lm.LM``) the figure holds
    one layer's FLOPs, so compare it with a one-layer count, or use :func:`flops_per_step`.
    """
    analysis = compiled.cost_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    if not analysis or "flops" not in analysis:
        return None
    return float(analysis["flops"])


def peak(device: Any, dtype: str = "bfloat16") -> tuple[float | None, str]:
    """(peak FLOP/s, where it comes from) for a JAX device's chip: the chip table's dense bf16 peak,
    per chip (on v2, v3 and TPU7x one chip shows as two JAX devices, each with half of it).

    A CPU has no datasheet row: the figure is :mod:`tpututor.hardware`'s labelled estimate. For
    MFU on a CPU, :func:`cpu_ceiling` (a measured matmul) is the fairer yardstick.
    """
    from . import bench

    return bench.peak_for(device.device_kind, device.platform, dtype)


def cpu_ceiling(dtype: str = "float32", size: int = 1024, repeats: int = 5):
    """The FLOP/s of a square ``size`` matmul measured here in JAX (:func:`tpututor.bench.matmul`).

    Returns the :class:`tpututor.bench.Record`; its ``flops_per_s`` is the ceiling.
    """
    from . import bench

    return bench.matmul(size, dtype, "jax", repeats=repeats)


def mfu(model_flops: float, seconds: float, peak_flops: float | None) -> float | None:
    """Model FLOPs utilisation: ``model_flops / (seconds * peak_flops)``; None without a peak."""
    if seconds is None or seconds <= 0:
        raise ValueError(f"step time must be positive seconds, got {seconds!r}")
    if model_flops < 0:
        raise ValueError(f"model FLOPs cannot be negative, got {model_flops!r}")
    if not peak_flops:
        return None
    return model_flops / (seconds * peak_flops)


@dataclass(frozen=True)
class Throughput:
    """One measured training speed."""

    tokens_per_s: float
    flops_per_s: float  # model FLOP/s
    mfu: float | None  # against ``peak_flops``
    peak_flops: float | None

    def __str__(self) -> str:
        share = "" if self.mfu is None else f", MFU {self.mfu:.1%}"
        return f"{self.tokens_per_s:,.0f} tokens/s, {self.flops_per_s / 1e9:,.1f} GFLOP/s{share}"


def throughput(cfg: Any, batch: int, seconds_per_step: float, peak_flops: float | None) -> Throughput:
    """Tokens/s, model FLOP/s and MFU of steps of ``batch`` sequences taking ``seconds_per_step``."""
    flops = flops_per_step(cfg, batch)
    share = mfu(flops, seconds_per_step, peak_flops)
    tokens = batch * _dims(cfg)[4]
    return Throughput(tokens / seconds_per_step, flops / seconds_per_step, share, peak_flops)
