"""Paged attention and memory kinds (lessons 09b (paged attention), section 3, and 09c (host offload), section 1).

Pages and page tables in plain JAX, the layout of JAX's ragged paged attention kernel for TPUs:
:func:`pages_from_cache`, :func:`check_page_table` (an entry outside the pool is a
:class:`PageTableError`), :func:`contiguous_attention` and :func:`paged_attention` (grouped-query
heads included). Cold pages to host memory: :func:`host_memory`, :func:`offload`,
:func:`host_placement` (JAX memory kinds, ``pinned_host``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import SingleDeviceSharding

__all__ = [
    "PageTableError",
    "check_page_table",
    "pages_from_cache",
    "contiguous_attention",
    "paged_attention",
    "host_memory",
    "offload",
    "host_placement",
]


class PageTableError(ValueError):
    """A page table entry points outside the page pool."""


# --------------------------------------------------------------------------- paged attention


def _concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_page_table(page_table, num_pages: int, lengths=None, page_size: int | None = None) -> None:
    """Raise :class:`PageTableError` for an entry outside ``0 .. num_pages - 1``, or too few pages for a length."""
    table = np.asarray(page_table)
    if table.ndim != 2:
        raise PageTableError(f"a page table is (sequences, pages per sequence), got shape {table.shape}")
    bad = np.argwhere((table < 0) | (table >= num_pages))
    if len(bad):
        s, j = bad[0]
        raise PageTableError(
            f"page table entry [{s}, {j}] = {int(table[s, j])} points outside the pool of {num_pages} "
            f"pages (valid: 0..{num_pages - 1}); {len(bad)} bad entries in all. Pad unused entries "
            "with a valid page (0): the length masks them"
        )
    if lengths is not None and page_size:
        need = -(-np.asarray(lengths) // page_size)
        short = np.argwhere(need > table.shape[1]).ravel()
        if len(short):
            raise PageTableError(
                f"sequence {int(short[0])} holds {int(np.asarray(lengths)[short[0]])} tokens, more "
                f"than {table.shape[1]} pages of {page_size}: give it more pages"
            )


def pages_from_cache(k, v, page_size: int, num_pages: int, page_order=None):
    """A page pool and page table holding the contiguous cache ``k``, ``v`` (B, S, H, Dh).

    The pool is (num_pages, page_size, 2H, Dh), keys at even and values at odd heads (the layout
    of ``jax.experimental.pallas.ops.tpu.ragged_paged_attention``); sequence b's j-th block of
    ``page_size`` tokens goes to page ``page_order[b * S // page_size + j]`` (default: in order).
    Returns (pool, page_table (B, S // page_size) int32).
    """
    b, s, h, d = k.shape
    if s % page_size:
        raise ValueError(f"the cache length {s} is not a multiple of page_size={page_size}")
    per_seq = s // page_size
    order = np.arange(b * per_seq) if page_order is None else np.asarray(page_order)
    if len(order) < b * per_seq or len(set(order[: b * per_seq].tolist())) < b * per_seq:
        raise PageTableError(f"{b} sequences of {per_seq} pages need {b * per_seq} distinct pages, got {len(order)}")
    table = order[: b * per_seq].reshape(b, per_seq).astype(np.int32)
    check_page_table(table, num_pages)
    kv = jnp.stack([k, v], axis=3).reshape(b, per_seq, page_size, 2 * h, d)  # heads: k0, v0, k1, v1, ...
    pool = (
        jnp.zeros((num_pages, page_size, 2 * h, d), k.dtype)
        .at[table.reshape(-1)]
        .set(kv.reshape(b * per_seq, page_size, 2 * h, d))
    )
    return pool, jnp.asarray(table)


def contiguous_attention(q, k, v, lengths):
    """One query per sequence against a contiguous cache: q (B, H, Dh), k and v (B, S, KV, Dh), lengths (B,).

    KV divides H: each key/value head serves H // KV query heads (grouped-query attention).
    """
    b, h, d = q.shape
    kv = k.shape[2]
    grouped = q.reshape(b, kv, h // kv, d)  # query heads in groups, one group per key/value head
    scores = jnp.einsum("bkgd,bskd->bkgs", grouped, k, preferred_element_type=jnp.float32) / math.sqrt(d)
    mask = jnp.arange(k.shape[1])[None, None, None, :] < jnp.asarray(lengths)[:, None, None, None]
    probs = jax.nn.softmax(jnp.where(mask, scores, jnp.finfo(jnp.float32).min), axis=-1)
    out = jnp.einsum("bkgs,bskd->bkgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return out.reshape(b, h, d)


def paged_attention(q, pool, page_table, lengths):
    """One query per sequence against a paged cache, in plain JAX: gather each sequence's pages, then attend.

    q (B, H, Dh); pool (P, page_size, 2KV, Dh) (keys at even heads, values at odd; KV divides H); page_table
    (B, pages per sequence) int32; lengths (B,) tokens held. Outside ``jit`` an entry outside the
    pool raises :class:`PageTableError`; inside, a sequence with such an entry gets NaN as its
    output (float32 whatever the pool's dtype, int8 or fp8 too), never another page's data.

    The gather builds each sequence's whole cache (B, pages x page_size, ...) as a new array
    before attending: it saves memory held, not bytes read. A paged-attention kernel reads the
    pages where they lie instead.
    """
    if _concrete(page_table):
        check_page_table(page_table, pool.shape[0], lengths if _concrete(lengths) else None, pool.shape[1])
    table = jnp.asarray(page_table)
    pages = jnp.take(pool, table, axis=0, mode="clip")  # (B, n, page_size, 2H, Dh)
    b, n, size, h2, d = pages.shape
    kv = pages.reshape(b, n * size, h2, d)
    out = contiguous_attention(q, kv[:, :, 0::2], kv[:, :, 1::2], lengths)
    outside = jnp.any((table < 0) | (table >= pool.shape[0]), axis=1)  # (B,): a bad entry anywhere in the row
    return jnp.where(outside[:, None, None], jnp.nan, out)


# --------------------------------------------------------------------------- memory kinds


def host_memory(device=None) -> str | None:
    """``"pinned_host"`` if ``device`` has that memory kind (JAX memory spaces), else None."""
    device = device or jax.devices()[0]
    kinds = {m.kind for m in device.addressable_memories()}
    return "pinned_host" if "pinned_host" in kinds else None


def offload(x, memory_kind: str, device=None):
    """``x`` copied to ``memory_kind`` ("pinned_host" or "device") of ``device`` with ``jax.device_put``."""
    device = device or next(iter(x.devices()))
    return jax.device_put(x, SingleDeviceSharding(device, memory_kind=memory_kind))


def host_placement(fn: Callable, *args, device=None) -> tuple[str | None, str]:
    """Compile ``fn`` with its output placed in pinned host memory; (HLO entry layout, "") or (None, why not).

    A buffer in host memory shows as ``S(5)`` in the compiled module's entry layout. Where the
    backend refuses such a program (JAX 0.7.2 on a CPU: "No registered implementation ...
    annotate_device_placement"; JAX 0.10.2 compiles it), the reason comes back instead of an exception.
    """
    device = device or jax.devices()[0]
    if host_memory(device) is None:
        return None, f"{device.device_kind} lists no pinned_host memory"
    try:
        compiled = (
            jax.jit(fn, out_shardings=SingleDeviceSharding(device, memory_kind="pinned_host")).lower(*args).compile()
        )
        jax.block_until_ready(compiled(*args))
    except Exception as err:  # jaxlib's XlaRuntimeError on old versions
        return (
            None,
            f"JAX {jax.__version__} cannot compile a program with a pinned_host output on "
            f"{device.platform.upper()}: {str(err).splitlines()[0][:200]}",
        )
    line = next((ln for ln in compiled.as_text().splitlines() if "entry_computation_layout" in ln), "")
    return line.split("entry_computation_layout=")[-1].split("}}")[0] + "}}" if line else "", ""
