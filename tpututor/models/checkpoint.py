"""Hugging Face checkpoints in and out of :class:`tpututor.models.llama.Llama`.

A ``save_pretrained`` directory holds ``config.json`` and one or more ``*.safetensors`` files of
PyTorch-named tensors. Reading one into the NNX model is a name map and a transpose::

    Hugging Face tensor (PyTorch layout)                NNX parameter                        change
    model.embed_tokens.weight (V, D)                    embed.embedding (V, D)               none
    model.layers.{i}.self_attn.q_proj.weight (H*Dh, D)  layers.attn.q.kernel[i] (D, H*Dh)    transposed
    ...k_proj, v_proj .weight (K*Dh, D)                 layers.attn.k/v.kernel[i] (D, K*Dh)  transposed (GQA: K heads)
    ...q_proj.bias, k_proj.bias, v_proj.bias (Qwen2)    layers.attn.q/k/v.bias[i]            none
    ...o_proj.weight (D, H*Dh)                          layers.attn.o.kernel[i] (H*Dh, D)    transposed
    ...mlp.{gate,up,down}_proj.weight                   layers.mlp.{gate,up,down}.kernel[i]  transposed
    ...input_layernorm.weight                           layers.attn_norm.weight[i]           none
    ...post_attention_layernorm.weight                  layers.mlp_norm.weight[i]            none
    model.norm.weight                                   norm.weight                          none
    lm_head.weight (V, D), absent if tied               lm_head.kernel (D, V)                transposed

PyTorch's ``nn.Linear`` stores (out, in) and computes ``x @ W.T``; Flax stores (in, out) and computes
``x @ W``: hence the transposes. The layers' tensors are stacked along a new first axis, the
layer axis the scan runs over. RoPE needs no conversion: the model rotates a head's first half
against its second half, the layout Hugging Face's checkpoints are written in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx
from safetensors.numpy import load_file, save_file

from .llama import Config, Llama

__all__ = ["read_config", "load", "save", "hf_tensors", "HF_LAYER_NAMES"]

# NNX path inside one layer -> the tensor's name inside ``model.layers.{i}.`` (and whether to transpose)
HF_LAYER_NAMES = {
    ("attn", "q", "kernel"): ("self_attn.q_proj.weight", True),
    ("attn", "k", "kernel"): ("self_attn.k_proj.weight", True),
    ("attn", "v", "kernel"): ("self_attn.v_proj.weight", True),
    ("attn", "o", "kernel"): ("self_attn.o_proj.weight", True),
    ("attn", "q", "bias"): ("self_attn.q_proj.bias", False),
    ("attn", "k", "bias"): ("self_attn.k_proj.bias", False),
    ("attn", "v", "bias"): ("self_attn.v_proj.bias", False),
    ("mlp", "gate", "kernel"): ("mlp.gate_proj.weight", True),
    ("mlp", "up", "kernel"): ("mlp.up_proj.weight", True),
    ("mlp", "down", "kernel"): ("mlp.down_proj.weight", True),
    ("attn_norm", "weight"): ("input_layernorm.weight", False),
    ("mlp_norm", "weight"): ("post_attention_layernorm.weight", False),
}


def read_config(directory: str | Path, **overrides: Any) -> Config:
    """The model's :class:`Config` from ``directory/config.json``."""
    path = Path(directory) / "config.json"
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist: give a directory written by save_pretrained "
            "(or downloaded with huggingface_hub.snapshot_download)"
        )
    return Config.from_hf(json.loads(path.read_text()), **overrides)


def _read_tensors(directory: Path) -> dict[str, np.ndarray]:
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {directory}: save with safe_serialization (the default)")
    tensors: dict[str, np.ndarray] = {}
    for f in files:
        tensors.update(load_file(str(f)))
    return tensors


def _set(tree: dict, path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        tree = tree[key]
    if path[-1] not in tree:
        raise KeyError(f"the model has no parameter {'/'.join(path)}")
    tree[path[-1]] = value


def load(directory: str | Path, *, dtype: str = "float32", **overrides: Any) -> Llama:
    """A :class:`Llama` holding the checkpoint in ``directory`` (weights cast to ``dtype``)."""
    directory = Path(directory)
    cfg = read_config(directory, **overrides)
    tensors = _read_tensors(directory)
    model = nnx.eval_shape(lambda: Llama(cfg, nnx.Rngs(0)))  # shapes only: nothing random is allocated
    state = nnx.state(model, nnx.Param)
    pure = nnx.to_pure_dict(state)
    cast = lambda a: np.asarray(a, dtype=dtype)
    used = set()

    def take(name: str) -> np.ndarray:
        if name not in tensors:
            raise KeyError(f"the checkpoint has no tensor {name!r}: is it a {cfg.family} model?")
        used.add(name)
        return tensors[name]

    _set(pure, ("embed", "embedding"), cast(take("model.embed_tokens.weight")))
    _set(pure, ("norm", "weight"), cast(take("model.norm.weight")))
    if not cfg.tie_embeddings:
        _set(pure, ("lm_head", "kernel"), cast(take("lm_head.weight").T))
    for path, (name, transpose) in HF_LAYER_NAMES.items():
        if path[-1] == "bias" and not cfg.qkv_bias:
            continue
        layers = [take(f"model.layers.{i}.{name}") for i in range(cfg.n_layers)]
        _set(pure, ("layers",) + path, cast(np.stack([w.T if transpose else w for w in layers])))
    left = sorted(set(tensors) - used - {"lm_head.weight"})
    if left:
        raise ValueError(f"the checkpoint has tensors this model does not read: {left[:5]}")
    nnx.replace_by_pure_dict(state, pure)
    nnx.update(model, state)
    return model


def hf_tensors(model: Llama) -> dict[str, np.ndarray]:
    """The model's weights under Hugging Face's names and layouts (the inverse of :func:`load`)."""
    cfg = model.cfg
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    get = lambda *path: np.asarray(jax.device_get(_get(pure, path)), dtype=np.float32)  # noqa: E731
    out = {"model.embed_tokens.weight": get("embed", "embedding"), "model.norm.weight": get("norm", "weight")}
    if not cfg.tie_embeddings:
        out["lm_head.weight"] = np.ascontiguousarray(get("lm_head", "kernel").T)
    for path, (name, transpose) in HF_LAYER_NAMES.items():
        if path[-1] == "bias" and not cfg.qkv_bias:
            continue
        stacked = get("layers", *path)
        for i in range(cfg.n_layers):
            out[f"model.layers.{i}.{name}"] = np.ascontiguousarray(stacked[i].T if transpose else stacked[i])
    return out


def _get(tree: dict, path: tuple[str, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def save(model: Llama, directory: str | Path) -> Path:
    """Write ``config.json`` and ``model.safetensors`` that ``transformers`` loads (``from_pretrained``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(model.cfg.to_hf(), indent=2) + "\n")
    save_file(hf_tensors(model), str(directory / "model.safetensors"), metadata={"format": "pt"})
    return directory
