"""Prefix caching: requests that share a prompt's first blocks reuse their cached keys and values.

The keys and values of a token depend only on the tokens before it, so two prompts that start with
the same system prompt compute the same cache for it. :class:`PrefixCache` keeps full blocks of
``page_size`` tokens in a page pool (the layout of :func:`tpututor.serving.paged.paged_attention`: keys at
even heads, values at odd ones), found by the whole token prefix up to the block's end (vLLM chains
a block's hash to its parent's; a tuple of the tokens is the same key, unhashed). A request copies
its matched pages into its cache and runs only the rest of its prompt through the model
(:func:`tpututor.serving.decode.forward` at the position where the match ends).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import decode, sizing

__all__ = ["block_keys", "PrefixCache", "suffix_prefill_flops"]


def block_keys(tokens: Sequence[int], page_size: int) -> list[tuple[int, ...]]:
    """The key of each full block of ``tokens``: every token from the start to the block's end."""
    if page_size < 1:
        raise ValueError(f"page_size must be positive, got {page_size}")
    ids = [int(t) for t in tokens]
    return [tuple(ids[:end]) for end in range(page_size, len(ids) + 1, page_size)]


def suffix_prefill_flops(cfg: Any, prefix: int, suffix: int) -> float:
    """FLOPs of a prefill of ``suffix`` tokens after ``prefix`` cached ones (the matmuls, and causal attention).

    ``prefix=0`` is :func:`tpututor.serving.sizing.prefill_cost`'s count for the whole prompt.
    """
    attention = 4 * cfg.n_layers * cfg.d_model * suffix * (prefix + suffix / 2)
    return float(2 * sizing.matmul_weights(cfg) * suffix + attention)


@functools.partial(jax.jit, donate_argnums=(2,))
def _fill(pools, table, cache):
    """``cache`` with the pages ``table`` of every layer's pool laid end to end from position 0."""
    out = []
    for pool, layer in zip(pools, cache):
        pages = pool[table]  # (n, page_size, 2H, Dh)
        kv = pages.reshape(1, -1, *pages.shape[2:])  # keys at even heads, values at odd
        out.append(
            {
                "k": jax.lax.dynamic_update_slice(layer["k"], kv[:, :, 0::2], (0, 0, 0, 0)),
                "v": jax.lax.dynamic_update_slice(layer["v"], kv[:, :, 1::2], (0, 0, 0, 0)),
            }
        )
    return out


@functools.partial(jax.jit, donate_argnums=(0,))
def _store(pools, cache, page, start):
    """``pools`` with cache positions ``start .. start + page_size`` of row 0 written to page ``page``."""
    size = pools[0].shape[1]
    out = []
    for pool, layer in zip(pools, cache):
        k, v = (jax.lax.dynamic_slice_in_dim(layer[name][0], start, size) for name in ("k", "v"))  # (size, H, Dh)
        kv = jnp.stack([k, v], axis=2).reshape(size, 2 * k.shape[1], k.shape[2])
        out.append(jax.lax.dynamic_update_index_in_dim(pool, kv.astype(pool.dtype), page, axis=0))
    return out


@functools.lru_cache(maxsize=16)
def _suffix_prefill(cfg: Any):
    """``(params, tokens (1, T), cache, pos (1,), last) -> (next token, logits at ``last``, cache)``, compiled per T."""

    def run(params, tokens, cache, pos, last):
        logits, cache = decode.forward(params, tokens, cache, pos, cfg=cfg)
        row = jax.lax.dynamic_index_in_dim(logits[0], last, keepdims=False)
        return jnp.argmax(row).astype(jnp.int32), row, cache

    return jax.jit(run, donate_argnums=(2,))


class PrefixCache:
    """A pool of ``num_pages`` pages of ``page_size`` tokens per layer, and the prefixes they hold.

    ``prefill(params, prompt)`` returns (first token, its logits (vocab,), a cache of ``cache_len``
    for decoding, the prompt tokens taken from the pool instead of computed). Full blocks it
    computes are added to the pool (unless ``store=False``) while free pages last (a server would
    evict the least recently used; this one stops adding).
    """

    def __init__(self, cfg: Any, num_pages: int, page_size: int, cache_len: int | None = None, device=None):
        self.cfg, self.page_size = cfg, page_size
        self.cache_len = cache_len or cfg.seq_len
        if self.cache_len % page_size:
            raise ValueError(f"cache_len={self.cache_len} is not a multiple of page_size={page_size}")
        shape = (num_pages, page_size, 2 * cfg.n_kv_heads, cfg.head_dim)
        device = device or jax.devices()[0]  # committed, like the pools _store returns: one compilation
        self.pools = [
            jax.device_put(jnp.zeros(shape, jnp.dtype(cfg.compute_dtype)), device) for _ in range(cfg.n_layers)
        ]
        self.pages: dict[tuple[int, ...], int] = {}  # prefix key -> page holding its last block
        self.free = list(range(num_pages))

    def match(self, prompt: Sequence[int]) -> list[int]:
        """The pages holding the longest run of ``prompt``'s full blocks already in the pool.

        The last prompt token is never matched: its logits give the first new token, so it is computed.
        """
        found = []
        for key in block_keys(list(prompt)[:-1], self.page_size):
            if key not in self.pages:
                break
            found.append(self.pages[key])
        return found

    def prefill(self, params, prompt: Sequence[int], store: bool = True):
        ids = [int(t) for t in prompt]
        decode.check_fits(len(ids), 1, self.cache_len)
        pages = self.match(ids)
        start = len(pages) * self.page_size
        cache = decode.init_cache(self.cfg, 1, self.cache_len)
        if pages:
            cache = _fill(self.pools, jnp.asarray(pages, jnp.int32), cache)
        rest = ids[start:]
        width = min(decode.bucket(len(rest), self.cache_len), self.cache_len - start)  # never past the cache's end
        tokens = np.zeros((1, width), np.int32)
        tokens[0, : len(rest)] = rest
        run = _suffix_prefill(self.cfg)
        tok, logits, cache = run(
            params, jnp.asarray(tokens), cache, jnp.array([start], jnp.int32), jnp.int32(len(rest) - 1)
        )
        if store:
            self._add(ids, cache, len(pages))
        return tok, logits, cache, start

    def _add(self, ids: Sequence[int], cache, have: int) -> None:
        keys = block_keys(ids, self.page_size)
        new = [(j, key) for j, key in enumerate(keys) if j >= have and key not in self.pages][: len(self.free)]
        for j, key in new:  # one page at a time: one compiled program for any number of pages
            page = self.free.pop(0)
            self.pools = _store(self.pools, cache, jnp.int32(page), jnp.int32(j * self.page_size))
            self.pages[key] = page
