"""An int8 KV cache: keys and values stored as int8 with one float32 scale per token and head.

Each cached key (and value) vector of ``head_dim`` numbers is scaled so its largest magnitude maps
to 127 (:func:`quantize`); the cache holds 1 byte per number plus 4 bytes per vector against bf16's
2 bytes per number, so about half the memory (:func:`bytes_per_number`). :func:`forward` is
:func:`tpututor.decode.forward` with the write quantized and the read multiplied back.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp

from .. import lm

__all__ = ["quantize", "dequantize", "init_cache", "bytes_per_number", "forward", "make_prefill"]


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

    Pass it as ``kv_bytes`` to :func:`tpututor.decode.max_batch` or the serving planner.
    """
    return 1 + scale_bytes / head_dim


def init_cache(cfg: Any, batch: int, length: int | None = None, device=None) -> list[dict]:
    """An empty int8 cache: per layer ``k``, ``v`` int8 (B, S, H, Dh) and ``k_scale``, ``v_scale`` float32 (B, S, H, 1)."""
    length = cfg.seq_len if length is None else length
    device = device or jax.devices()[0]
    values = (batch, length, cfg.n_heads, cfg.head_dim)
    scales = (batch, length, cfg.n_heads, 1)
    zeros = lambda shape, dt: jax.device_put(jnp.zeros(shape, dt), device)
    return [{"k": zeros(values, jnp.int8), "v": zeros(values, jnp.int8),
             "k_scale": zeros(scales, jnp.float32), "v_scale": zeros(scales, jnp.float32)} for _ in range(cfg.n_layers)]


def _rms_norm(x, scale, eps: float = 1e-6):
    x = x.astype(jnp.float32)
    return x * (jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * scale)


def _dense(x, p: Mapping[str, Any], dt):
    """x @ kernel in ``dt``, an int8 kernel (``decode.quantize_int8``) scaled per column after the product."""
    if "scale" in p:
        y = jnp.dot(x.astype(dt), p["kernel"].astype(dt), preferred_element_type=jnp.float32)
        return (y * p["scale"]).astype(dt)
    return jnp.dot(x.astype(dt), p["kernel"].astype(dt))


def forward(params: Mapping[str, Any], tokens, cache: Sequence[Mapping[str, Any]], pos, *, cfg: Any):
    """:func:`tpututor.decode.forward` on an int8 cache: -> (logits (B, T, vocab) float32, the new cache)."""
    dt = jnp.dtype(cfg.compute_dtype)
    b, t = tokens.shape
    pos = jnp.asarray(pos, jnp.int32).reshape(b)
    positions = pos[:, None] + jnp.arange(t, dtype=jnp.int32)
    x = params["embed"]["embedding"].astype(dt)[tokens] + params["pos_embed"]["embedding"].astype(dt)[positions]
    length = cache[0]["k"].shape[1]
    visible = jnp.arange(length)[None, None, :] <= positions[:, :, None]
    write = jax.vmap(lambda c, u, p: jax.lax.dynamic_update_slice(c, u.astype(c.dtype), (p, 0, 0)))
    new_cache = []
    for i in range(cfg.n_layers):
        p = params["blocks"][i]
        h = _rms_norm(x, p["norm1"]["scale"])
        q, k, v = (_dense(h, p[name], dt).reshape(b, t, cfg.n_heads, cfg.head_dim)
                   for name in ("query", "key", "value"))
        (k8, ks), (v8, vs) = quantize(k), quantize(v)
        layer = {"k": write(cache[i]["k"], k8, pos), "v": write(cache[i]["v"], v8, pos),
                 "k_scale": write(cache[i]["k_scale"], ks, pos), "v_scale": write(cache[i]["v_scale"], vs, pos)}
        new_cache.append(layer)
        att = lm.attention(q, dequantize(layer["k"], layer["k_scale"], dt), dequantize(layer["v"], layer["v_scale"], dt),
                           visible[:, None])
        x = x + _dense(att.reshape(b, t, cfg.d_model), p["out"], dt).astype(x.dtype)
        up = jax.nn.gelu(_dense(_rms_norm(x, p["norm2"]["scale"]), p["up"], dt))
        x = x + _dense(up, p["down"], dt).astype(x.dtype)
    logits = _dense(_rms_norm(x, params["norm"]["scale"]), params["head"], dt).astype(jnp.float32)
    return logits, new_cache


def make_prefill(cfg: Any):
    """``prefill(params, tokens (B, T), cache) -> (logits (B, T, vocab), int8 cache)`` from position 0, the cache donated."""
    return jax.jit(lambda params, tokens, cache: forward(params, tokens, cache, jnp.zeros(tokens.shape[0], jnp.int32),
                                                         cfg=cfg), donate_argnums=(2,))
