"""A served model over a mesh (lesson 09c (serving stacks), section 2): weights and KV cache split by heads, no FSDP.

:data:`SERVING_RULES` (lm's logical axes without FSDP: a decode step must not gather weights every
token), :func:`cache_spec` and :func:`serving_shardings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
from jax.sharding import NamedSharding

from .. import lm

__all__ = [
    "SERVING_RULES",
    "cache_spec",
    "serving_shardings",
]

# --------------------------------------------------------------------------- sharding

# lm.RULES without FSDP: a decode step must not gather weights over ICI every token (scaling-book,
# inference chapter), so the model dimension stays whole; heads and MLP units split over "tensor".
SERVING_RULES: dict[str, Any] = {
    "batch": ("data", "fsdp"),
    "embed": None,
    "heads": "tensor",
    "kv_heads": "tensor",
    "mlp": "tensor",
    "layers": None,
    "vocab": None,
    "length": None,
    "norm": None,
    "act_embed": None,
}


def cache_spec(mesh, rules: Mapping[str, Any] = SERVING_RULES):
    """The PartitionSpec of one (batch, length, kv_heads, head_dim) cache array: batch and heads split."""
    return lm.spec_for(("batch", "length", "kv_heads", None), rules, mesh)


def serving_shardings(params, cache, mesh, rules: Mapping[str, Any] = SERVING_RULES):
    """(parameter shardings, cache shardings) on ``mesh``: weights by ``lm``'s logical axes, the cache by batch and heads."""
    spec = cache_spec(mesh, rules)
    for leaf in jax.tree.leaves(cache):  # a clear error for a batch or head count that does not divide
        lm.spec_for(("batch", "length", "kv_heads", None), rules, mesh, leaf.shape, "the KV cache")
    return lm.shardings(params, rules, mesh), jax.tree.map(lambda _: NamedSharding(mesh, spec), cache)
