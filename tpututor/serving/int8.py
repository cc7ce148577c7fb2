"""int8 weights for serving (lesson 09b (int8), section 2): per-channel symmetric quantization and the check
that a compiled program reads the int8 weights as they are, without a dequantized copy.

:func:`quantize_int8` and :func:`dequantize` for one matrix, :func:`quantize_params` for a server's
tree (:func:`tpututor.serving.decode.serving_params`), which :func:`tpututor.serving.decode.forward`
reads as it is; :func:`dequantized_copies` finds float copies of int8 kernels in optimised HLO.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from .. import hlo

__all__ = [
    "quantize_int8",
    "dequantize",
    "quantize_params",
    "dequantized_copies",
]

# --------------------------------------------------------------------------- int8 weights


def quantize_int8(w):
    """Per-output-channel symmetric int8: ``{"kernel": int8 (in, out), "scale": float32 (out,)}``.

    Each column is scaled so that its largest magnitude maps to 127; ``kernel * scale`` gives the
    weight back to within half a step of that column.
    """
    w = jnp.asarray(w, jnp.float32)
    if w.ndim != 2:
        raise ValueError(f"quantize_int8 takes a (in, out) matrix, got shape {w.shape}")
    scale = jnp.max(jnp.abs(w), axis=0) / 127.0
    scale = jnp.where(scale == 0, 1.0, scale)
    return {"kernel": jnp.clip(jnp.round(w / scale), -127, 127).astype(jnp.int8), "scale": scale}


def dequantize(p: Mapping[str, Any]):
    """The float32 matrix an int8 ``{"kernel", "scale"}`` stands for."""
    return p["kernel"].astype(jnp.float32) * p["scale"]


def quantize_params(params: Mapping[str, Any]):
    """Every matmul kernel (``.../kernel``) to int8 per channel; embeddings and norms unchanged.

    Pass the tree a server keeps (:func:`serving_params`: one dict per layer, bf16 embeddings) to
    compare like with like; from the float32 master weights the embeddings stay float32.
    """

    def walk(node):
        if isinstance(node, Mapping):
            if "kernel" in node:
                return quantize_int8(node["kernel"])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [walk(v) for v in node]
        return node

    if isinstance(params.get("layers"), Mapping):
        raise ValueError("the layers are still stacked: quantize the tree serving_params returned")
    return walk(params)


def dequantized_copies(hlo_text: str, params: Mapping[str, Any]) -> list[str]:
    """The buffers of a compiled program that hold an int8 kernel converted to a float type.

    ``hlo_text`` is the optimised HLO (``jit(f).lower(...).compile().as_text()``); ``params`` the
    tree :func:`quantize_params` made. A top-level instruction (not inside a fusion) whose output
    has a kernel's shape in bf16, f16 or f32 and that reads an int8 kernel is a dequantized copy
    of it, written to memory and read back by the matmul: the program then reads more bytes than
    the int8 weights. An empty list means every conversion happens inside the fusion that does
    the product, the weights crossing from memory as int8.
    """
    kernels = [leaf for leaf in jax.tree.leaves(params) if getattr(leaf, "ndim", 0) == 2 and str(leaf.dtype) == "int8"]
    if not kernels:
        raise ValueError("params holds no int8 matrices: pass the tree quantize_params returned")
    dims = {tuple(k.shape) for k in kernels} | {tuple(reversed(k.shape)) for k in kernels}
    entry = hlo.parse(hlo_text).entry.instructions
    int8 = [ins.name for ins in entry if ins.shape.startswith("s8[")]
    found = []
    for ins in entry:
        if ins.opcode == "parameter":
            continue
        outs = re.findall(r"\b(?:bf16|f16|f32)\[([\d,]*)\]", ins.shape)
        if not any(tuple(int(x) for x in d.split(",") if x) in dims for d in outs):
            continue
        if any(re.search(rf"(?<![\w.\-]){re.escape(name)}(?![\w\-]|\.\d)", ins.text) for name in int8):
            found.append(f"{ins.name} = {ins.shape} {ins.opcode}")
    return found
