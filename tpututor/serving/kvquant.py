"""An int8 KV cache: keys and values stored as int8 with one float32 scale per token and head.

Each cached key (and value) vector of ``head_dim`` numbers is scaled so its largest magnitude maps
to 127 (:func:`quantize`); the cache holds 1 byte per number plus 4 bytes per vector against bf16's
2 bytes per number, so about half the memory (:func:`bytes_per_number`). :func:`store` and
:func:`load` are the write (quantized) and the read (multiplied back) that :func:`forward` hands to
:func:`tpututor.serving.decode.forward`; the model itself is not written twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from . import decode

__all__ = ["quantize", "dequantize", "init_cache", "bytes_per_number", "store", "load", "forward", "make_prefill"]


def quantize(x):
    """Symmetric int8 over the last axis: (int8 values, float32 scales with that axis kept as 1)."""
    x = x.astype(jnp.float32)
    scale = jnp.max(jnp.abs(x), axis=-1, keepdims=True) / 127
    q = jnp.round(x / jnp.where(scale == 0, 1, scale))
    return jnp.clip(q, -127, 127).astype(jnp.int8), scale


def dequantize(q, scale, dtype=jnp.bfloat16):
    """int8 values times their scales, in ``dtype``."""
    return (q.astype(jnp.float32) * scale).astype(dtype)


def bytes_per_number(head_dim: int, scale_bytes: int = 4) -> float:
    """Cache bytes per key or value number: 1, plus a scale shared by ``head_dim`` numbers.

    Pass it as ``kv_bytes`` to :func:`tpututor.serving.sizing.max_batch` or the serving planner.
    """
    return 1 + scale_bytes / head_dim


def init_cache(cfg: Any, batch: int, length: int | None = None, device=None) -> list[dict]:
    """An empty int8 cache: per layer ``k``, ``v`` int8 (B, S, H, Dh) and ``k_scale``, ``v_scale`` float32 (B, S, H, 1)."""
    length = cfg.seq_len if length is None else length
    device = device or jax.devices()[0]
    values = (batch, length, cfg.n_kv_heads, cfg.head_dim)
    scales = (batch, length, cfg.n_kv_heads, 1)
    zeros = lambda shape, dt: jax.device_put(jnp.zeros(shape, dt), device)
    return [
        {
            "k": zeros(values, jnp.int8),
            "v": zeros(values, jnp.int8),
            "k_scale": zeros(scales, jnp.float32),
            "v_scale": zeros(scales, jnp.float32),
        }
        for _ in range(cfg.n_layers)
    ]


def store(layer: Mapping[str, Any], k, v, pos) -> dict:
    """The int8 cache's write: keys and values quantized, each row with its scales."""
    (k8, ks), (v8, vs) = quantize(k), quantize(v)
    return {
        "k": decode.write_rows(layer["k"], k8, pos),
        "v": decode.write_rows(layer["v"], v8, pos),
        "k_scale": decode.write_rows(layer["k_scale"], ks, pos),
        "v_scale": decode.write_rows(layer["v_scale"], vs, pos),
    }


def load(layer: Mapping[str, Any], dt):
    """The int8 cache's read: (keys, values) multiplied back by their scales, in ``dt``."""
    return dequantize(layer["k"], layer["k_scale"], dt), dequantize(layer["v"], layer["v_scale"], dt)


def forward(params: Mapping[str, Any], tokens, cache: Sequence[Mapping[str, Any]], pos, *, cfg: Any):
    """:func:`tpututor.serving.decode.forward` on an int8 cache: -> (logits (B, T, vocab) float32, the new cache)."""
    return decode.forward(params, tokens, cache, pos, cfg=cfg, store=store, load=load)


def make_prefill(cfg: Any):
    """``prefill(params, tokens (B, T), cache) -> (logits (B, T, vocab), int8 cache)`` from position 0, the cache donated."""
    return jax.jit(
        lambda params, tokens, cache: forward(params, tokens, cache, jnp.zeros(tokens.shape[0], jnp.int32), cfg=cfg),
        donate_argnums=(2,),
    )
