"""A small decoder-only Transformer language model, trained end to end (lesson 08a, training).

Everything the training lesson runs lives in this one file, which the notebook shows and its
subprocesses import (``python -m tpututor.lm train --help``):

* :class:`Config` and :data:`PROFILES`: the model's shape; :func:`config_for` sizes it for a run.
* :func:`encode` / :func:`decode`: a byte-level tokenizer (the 256 byte values of UTF-8 text: any language).
* :func:`stdlib_corpus`: text every machine has, the Python standard library's own source files;
  :func:`load_texts`: the same from a Hugging Face data set, for learners with internet.
* :func:`dataset`: the grain pipeline (windows of tokens, shuffled, batched, one slice per process);
  :func:`write_shards` / :func:`read_shards`: a folder of token files, each host reading its own;
  :func:`to_device` and :func:`device_prefetch`: batches onto the mesh, the next one ahead of the step.
* :class:`LM`: the model, :class:`tpututor.models.llama.Llama` (RMSNorm, RoPE, grouped-query
  attention, a SwiGLU MLP, the layers stacked and scanned) at an ``lm.Config``'s size; f32 master
  weights, bf16 compute. Lesson 13a (bring your own model) loads Hugging Face checkpoints into the
  same class.
* :data:`PARAM_AXES`, :data:`RULES`, :func:`make_mesh`, :func:`shardings`: named logical axes
  and the rules that map them onto the mesh axes ``data``, ``fsdp`` and ``tensor``.
* :func:`loss_fn`, :func:`train_step`, :func:`make_train_step`: the loss and the compiled step;
  :func:`remat_policy`: what each layer keeps for the backward pass.
* :func:`checkpoint_manager`, :func:`save`, :func:`restore`, :func:`load`: Orbax checkpoints.
* :func:`generate`: text sampled from the model; :func:`train`: the loop the subprocesses run.

**For other lessons (09 serves this model).** The parameters are a nested dict (``params`` of
the train state, or ``nnx.state(model, nnx.Param)``); a layer's weights are stacked along a
leading axis of ``n_layers``::

    embed/embedding (vocab, d_model)             norm/weight (d_model,)
    lm_head/kernel (d_model, vocab)
    layers/attn_norm/weight (L, d_model)         layers/mlp_norm/weight (L, d_model)
    layers/attn/q/kernel (L, d_model, n_heads x head_dim)
    layers/attn/k/kernel, v/kernel (L, d_model, n_kv_heads x head_dim)
    layers/attn/o/kernel (L, n_heads x head_dim, d_model)
    layers/mlp/gate/kernel, up/kernel (L, d_model, d_ff)   layers/mlp/down/kernel (L, d_ff, d_model)

``load(directory)`` returns ``(config, model)`` from the latest checkpoint of a training run.

JAX, Flax, Optax and NumPy are imported at the top, like any model file. grain, Orbax and
Hugging Face ``datasets`` are imported by the functions that use them (the pipeline, the
checkpoints, :func:`load_texts`), so a lesson that only builds or serves the model does not need
them installed. The model's shape, :class:`Config`, lives in :mod:`tpututor.lm_config`, which
imports no framework (lesson 11b (cost) sizes a run from it without JAX).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import math
import os
import queue
import re
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from . import hosts, tblog
from .lm_config import PROFILES, VOCAB, Config, config_for
from .models import llama

__all__ = [
    "Config",
    "PROFILES",
    "config_for",
    "VOCAB",
    "encode",
    "decode",
    "stdlib_corpus",
    "load_texts",
    "Windows",
    "dataset",
    "to_device",
    "device_prefetch",
    "LM",
    "llama_config",
    "POLICIES",
    "remat_policy",
    "PARAM_AXES",
    "RULES",
    "MESH_AXES",
    "make_mesh",
    "logical_axes",
    "spec_for",
    "shardings",
    "batch_sharding",
    "check_batch",
    "write_shards",
    "read_shards",
    "optimizer",
    "decays",
    "is_norm_scale",
    "init_state",
    "abstract_state",
    "loss_fn",
    "train_step",
    "make_train_step",
    "eval_step",
    "checkpoint_manager",
    "save",
    "restore",
    "load",
    "generate",
    "train",
    "main",
    "ShardingRuleError",
    "CheckpointMismatch",
]

# --------------------------------------------------------------------------- configuration
# Config, PROFILES, config_for and VOCAB live in tpututor.lm_config (no framework) and are re-exported here.


# --------------------------------------------------------------------------- tokenizer and corpus


def encode(text: str):
    """Text -> int32 token ids: the bytes of its UTF-8 encoding (an ASCII character is its code)."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)


def decode(ids: Iterable[int]) -> str:
    """Token ids -> text. Bytes that do not make UTF-8 (a model's mistake, or a character cut at the end
    of a window) and ids outside 0..255 show as the replacement character."""
    data = bytearray()
    out = []
    for i in ids:
        i = int(i)
        if 0 <= i < VOCAB:
            data.append(i)
        else:
            out.append(data.decode("utf-8", errors="replace") + "\ufffd")
            data.clear()
    return "".join(out) + data.decode("utf-8", errors="replace")


_SKIP_DIRS = {
    "test",
    "tests",
    "idle_test",
    "site-packages",
    "dist-packages",
    "__pycache__",
    "turtledemo",
    "lib2to3",
    "ensurepip",
    "pydoc_data",
    "encodings",
}


def stdlib_files(root: str | None = None) -> list[Path]:
    """The standard library's ``.py`` files (tests and bundled packages left out), in a fixed order."""
    root_path = Path(root or sysconfig.get_paths()["stdlib"])
    found = []
    for dirpath, dirnames, filenames in os.walk(root_path):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        found += [Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py")]
    if not found:
        raise FileNotFoundError(f"no .py files under {root_path}: pass root= the standard library's folder")
    return found


def stdlib_corpus(
    max_chars: int = 2_000_000, held_out_every: int = 10, root: str | None = None
) -> tuple[str, str, list[Path]]:
    """(training text, held-out text, files used): standard-library sources up to ``max_chars``.

    Every ``held_out_every``-th file goes to the held-out text, so evaluation reads code the
    model never trained on (whole files, not the tail of one).
    """
    train, held, used, total = [], [], [], 0
    for i, path in enumerate(stdlib_files(root)):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        (held if i % held_out_every == held_out_every - 1 else train).append(text)
        used.append(path)
        total += len(text)
        if total >= max_chars:
            break
    return "\n".join(train), "\n".join(held), used


def load_texts(
    source: str,
    *,
    data_files: str | Sequence[str] | None = None,
    split: str = "train",
    field: str = "text",
    max_chars: int | None = None,
    cache_dir: str | None = None,
    **builder_kwargs,
) -> list[str]:
    """Texts from a Hugging Face data set: ``load_dataset(source, data_files=..., split=...)[field]``.

    With internet, ``source`` is a Hub name (``"roneneldan/TinyStories"``). Offline, the same call
    reads local files through a packaged builder: ``load_texts("text", data_files=[...],
    sample_by="document")`` gives one text per file (set ``HF_DATASETS_OFFLINE=1`` before
    ``datasets`` is imported, so nothing is looked up on the Hub).
    """
    from datasets import load_dataset

    ds = load_dataset(source, data_files=data_files, split=split, cache_dir=cache_dir, **builder_kwargs)
    if field not in ds.column_names:
        raise KeyError(f"{source!r} has no column {field!r}; its columns are {ds.column_names}: pass field=")
    texts, total = [], 0
    for row in ds:
        texts.append(row[field])
        total += len(row[field])
        if max_chars is not None and total >= max_chars:
            break
    return texts


# --------------------------------------------------------------------------- input pipeline


class Windows:
    """A grain data source: window ``i`` is ``seq_len + 1`` tokens starting at ``i * seq_len``.

    Inputs are the first ``seq_len`` tokens, targets the last ``seq_len`` (shifted by one).
    """

    def __init__(self, tokens, seq_len: int):
        if len(tokens) < seq_len + 1:
            raise ValueError(
                f"{len(tokens)} tokens make no window of {seq_len + 1}: use more text or a shorter seq_len"
            )
        self.tokens, self.seq_len = tokens, seq_len

    def __len__(self) -> int:
        return (len(self.tokens) - 1) // self.seq_len

    def __getitem__(self, i: int):
        start = int(i) * self.seq_len
        return self.tokens[start : start + self.seq_len + 1]


def dataset(tokens, seq_len: int, global_batch: int, *, seed: int = 0, process_index: int = 0, process_count: int = 1):
    """The grain pipeline; element ``s`` is this process's share of step ``s``'s batch.

    Windows are shuffled (a new order each epoch), repeated forever, cut into per-process
    batches of ``global_batch // process_count`` rows, and process ``p`` keeps batches
    ``p, p + n, p + 2n, ...``. So step ``s`` of every process together reads exactly the rows one
    process would read alone, in the same order; and resuming at step ``s`` is ``ds[s:]``.
    """
    import grain

    if global_batch % process_count:
        raise ValueError(
            f"global batch {global_batch} does not split over {process_count} processes: "
            f"use a multiple of {process_count}"
        )
    ds = grain.MapDataset.source(Windows(tokens, seq_len)).shuffle(seed=seed).repeat()
    ds = ds.batch(global_batch // process_count, drop_remainder=True)
    return ds[process_index::process_count].map(lambda w: {"inputs": w[:, :-1], "targets": w[:, 1:]})


def write_shards(text: str, directory: str | os.PathLike, shards: int = 8) -> list[str]:
    """``text``'s tokens cut into ``shards`` files ``shard-00003-of-00008.npy`` (uint8) in ``directory``:
    the folder stands in for a Cloud Storage bucket (a ``gs://`` path works too, through ``etils.epath``)."""
    from etils import epath

    root = epath.Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, part in enumerate(np.array_split(encode(text).astype(np.uint8), shards)):
        path = root / f"shard-{i:05d}-of-{shards:05d}.npy"
        with path.open("wb") as f:
            np.save(f, part)
        paths.append(str(path))
    return paths


def read_shards(directory: str | os.PathLike, shard_options=None):
    """This process's tokens from a folder of :func:`write_shards` files: the files
    ``shard_index, shard_index + shard_count, ...`` by grain's ``ShardOptions`` (default
    ``grain.sharding.ShardByJaxProcess()``: ``jax.process_index()`` of ``jax.process_count()``).
    Each host opens only its own files; for ``gs://`` the same call reads through ``etils.epath``."""
    import grain
    from etils import epath

    opts = shard_options if shard_options is not None else grain.sharding.ShardByJaxProcess(drop_remainder=True)
    files = sorted(epath.Path(directory).glob("shard-*-of-*.npy"))
    if not files or len(files) % opts.shard_count:
        raise ValueError(
            f"{directory} holds {len(files)} shard files, which do not split evenly over "
            f"{opts.shard_count} processes: write a multiple of {opts.shard_count} "
            f"(lm.write_shards(text, directory, shards=...))"
        )
    parts = []
    for path in files[opts.shard_index :: opts.shard_count]:
        with path.open("rb") as f:
            parts.append(np.load(f))
    return np.concatenate(parts).astype(np.int32)


def to_device(batch: Mapping[str, Any], sharding) -> dict:
    """This process's rows -> global arrays laid out by ``sharding`` (one call per host on a slice)."""
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in batch.items()}


def device_prefetch(batches: Iterator[Mapping[str, Any]], sharding, size: int = 2) -> Iterator[dict]:
    """Yield batches already on the devices: a thread reads and places the next ``size`` ahead.

    While the training step runs (JAX dispatches it and returns at once), the thread reads the
    next batch from ``batches`` and copies it to the devices. Stop early with ``.close()``.
    """
    q: queue.Queue = queue.Queue(maxsize=size)
    done, stop = object(), threading.Event()

    def fill():
        try:
            for b in batches:
                item = to_device(b, sharding)
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # hand the error to the consumer
            q.put(exc)

    thread = threading.Thread(target=fill, daemon=True, name="device_prefetch")
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:  # stop the thread and wait for it: no device work may outlive the loop
        stop.set()
        while thread.is_alive():
            try:
                q.get(timeout=0.1)
            except queue.Empty:
                pass
        thread.join()


# --------------------------------------------------------------------------- the model (Flax NNX)


def llama_config(cfg: Config) -> llama.Config:
    """``cfg`` as the Llama family's config: the same widths, a byte vocabulary, RoPE up to ``seq_len``.

    Weights in float32 and matmuls in ``cfg.compute_dtype`` (mixed precision); remat is chosen per
    step (:func:`make_train_step`), so the model's own default is off.
    """
    return llama.Config(
        family="llama",
        vocab=cfg.vocab,
        d_model=cfg.d_model,
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        n_kv_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim,
        d_ff=cfg.d_ff,
        rope_theta=cfg.rope_theta,
        max_len=cfg.seq_len,
        dtype=cfg.compute_dtype,
        remat=False,
    )


class LM(llama.Llama):
    """Lesson 08a's (training) model: :class:`tpututor.models.llama.Llama` (the definition that lesson 13a (bring your
    own model) loads Hugging Face checkpoints into) at the size of an ``lm.Config``. Tokens in, logits out."""

    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        if cfg.param_dtype != "float32":
            raise ValueError(f"the Llama model keeps float32 master weights; got param_dtype={cfg.param_dtype!r}")
        super().__init__(llama_config(cfg), rngs)


def _policies() -> dict:
    cp = jax.checkpoint_policies
    return {
        "none": False,
        "full": cp.nothing_saveable,
        "dots": cp.dots_with_no_batch_dims_saveable,
        "dots_all": cp.dots_saveable,
    }


POLICIES = ("none", "full", "dots", "dots_all")  # remat policy names for make_train_step


def remat_policy(policy) -> Callable | bool:
    """``policy`` (a name in POLICIES, or a ``jax.checkpoint_policies`` function) -> what the model's
    ``remat=`` takes: False for none, else the policy ``jax.checkpoint`` applies to every layer."""
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise ValueError(
                f"unknown remat policy {policy!r}: use one of {POLICIES} or a jax.checkpoint_policies function"
            )
        return _policies()[policy]
    if policy is None or policy is False:
        return False
    if not callable(policy):
        raise ValueError(f"remat policy must be a name in {POLICIES} or a jax.checkpoint_policies function")
    return policy


# --------------------------------------------------------------------------- sharding: logical axes

# Parameter name (regex on its path) -> one logical axis name per dimension. Optimizer state leaves
# (Adam's mu and nu) end with the same paths, so they follow their parameter.
# A layer's weights are stacked along a leading "layers" axis (the model scans over it).
PARAM_AXES: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    (r"(^|/)embed/embedding$", ("vocab", "embed")),
    (r"attn/q/kernel$", ("layers", "embed", "heads")),
    (r"attn/(k|v)/kernel$", ("layers", "embed", "kv_heads")),
    (r"attn/o/kernel$", ("layers", "heads", "embed")),
    (r"mlp/(gate|up)/kernel$", ("layers", "embed", "mlp")),
    (r"mlp/down/kernel$", ("layers", "mlp", "embed")),
    (r"lm_head/kernel$", ("embed", "vocab")),
    (r"(attn|mlp)_norm/weight$", ("layers", "norm")),  # a layer's two norms
    (r"(^|/)norm/weight$", ("norm",)),  # the final norm
)

MESH_AXES = ("data", "fsdp", "tensor")

# Logical axis -> mesh axis (or a tuple of them, or None: replicated). One rule set serves every
# strategy: the mesh's shape decides. data=8 is data parallel; fsdp=8 shards parameters and optimizer
# state 8 ways (FSDP); fsdp=4 x tensor=2 adds Megatron-style tensor parallelism on heads and mlp.
RULES: dict[str, Any] = {
    "batch": ("data", "fsdp"),  # activations and batches: split over every data-like axis
    "embed": "fsdp",  # parameters' model dimension: FSDP shards it
    "heads": "tensor",  # attention heads: tensor parallel
    "kv_heads": "tensor",  # key/value heads (fewer: grouped-query attention) split the same way
    "mlp": "tensor",  # the MLP's hidden units: tensor parallel
    "layers": None,  # the stacked layer axis: every device holds its share of every layer
    "vocab": None,
    "length": None,
    "norm": None,
    "act_embed": None,  # the residual stream's model dimension stays whole
}


class ShardingRuleError(ValueError):
    """A sharding rule that does not fit the mesh or the array; the message names the fix."""


def make_mesh(data: int = 1, fsdp: int = 1, tensor: int = 1, devices: Sequence | None = None):
    """A mesh with axes ``data``, ``fsdp`` and ``tensor`` (Auto axis types), over ``devices``."""
    devices = list(jax.devices() if devices is None else devices)
    shape = (data, fsdp, tensor)
    if math.prod(shape) != len(devices):
        raise ShardingRuleError(
            f"a mesh of data={data} x fsdp={fsdp} x tensor={tensor} needs {math.prod(shape)} "
            f"devices but {len(devices)} are given: make the sizes multiply to {len(devices)}"
        )
    return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)


def _path(keys) -> str:
    parts = []
    for k in keys:
        for attr in ("key", "idx", "name"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
        else:
            parts.append(str(k))
    return "/".join(parts)


def logical_axes(path: str, ndim: int) -> tuple[str | None, ...]:
    """The logical axes of the array at ``path`` (from :data:`PARAM_AXES`); scalars and unknowns replicate.

    One layer's weight taken out of the stack (``layers/3/attn/q/kernel``, as a server keeps them)
    has every axis but ``layers``.
    """
    for pattern, axes in PARAM_AXES:
        if re.search(pattern, path):
            if len(axes) == ndim:
                return axes
            if axes[:1] == ("layers",) and len(axes) - 1 == ndim:
                return axes[1:]
    return (None,) * ndim


def spec_for(
    axes: Sequence[str | None],
    rules: Mapping[str, Any],
    mesh,
    shape: Sequence[int] | None = None,
    what: str = "an array",
):
    """Logical axes -> a ``PartitionSpec`` on ``mesh`` through ``rules``.

    A mesh axis already used by an earlier dimension is skipped (one axis splits one dimension).
    Raises :class:`ShardingRuleError` for a rule naming an axis the mesh lacks, or a dimension
    that does not divide over its mesh axes.
    """
    used: set[str] = set()
    out = []
    for i, name in enumerate(axes):
        target = rules.get(name) if name is not None else None
        names = () if target is None else (target,) if isinstance(target, str) else tuple(target)
        missing = [n for n in names if n not in mesh.axis_names]
        if missing:
            raise ShardingRuleError(
                f"the rule {name!r} -> {target!r} names mesh axis {missing[0]!r}, but the mesh has axes "
                f"{tuple(mesh.axis_names)}: map {name!r} to one of those, or to None to keep it whole"
            )
        names = tuple(n for n in names if n not in used and mesh.shape[n] > 1)
        used.update(names)
        if shape is not None and names:
            ways = 1
            for n in names:
                ways *= mesh.shape[n]
            if shape[i] % ways:
                raise ShardingRuleError(
                    f"dimension {i} ({name!r}, size {shape[i]}) of {what} does not divide over mesh axes {names} "
                    f"({ways} devices): pick a size divisible by {ways}, or map {name!r} to None"
                )
        out.append(None if not names else names[0] if len(names) == 1 else names)
    return P(*out)


def shardings(tree, rules: Mapping[str, Any], mesh):
    """A ``NamedSharding`` for every leaf of ``tree`` (arrays or ShapeDtypeStructs), by its path."""

    def one(keys, leaf):
        path = _path(keys)
        return NamedSharding(mesh, spec_for(logical_axes(path, leaf.ndim), rules, mesh, leaf.shape, path))

    return jax.tree_util.tree_map_with_path(one, tree)


def batch_sharding(mesh, rules: Mapping[str, Any] = RULES):
    """How a (batch, length) array of tokens is laid out: rows split by the ``batch`` rule."""
    return NamedSharding(mesh, spec_for(("batch", "length"), rules, mesh))


def check_batch(global_batch: int, mesh, rules: Mapping[str, Any] = RULES) -> int:
    """The number of rows each data shard gets; a batch that does not divide is a clear error."""
    spec = spec_for(("batch",), rules, mesh)[0]
    names = () if spec is None else (spec,) if isinstance(spec, str) else spec
    ways = 1
    for n in names:
        ways *= mesh.shape[n]
    if global_batch % ways:
        lower, upper = global_batch // ways * ways, (global_batch // ways + 1) * ways
        raise ShardingRuleError(
            f"a global batch of {global_batch} rows does not divide over the {ways} data shards of mesh axes "
            f"{names}: use a multiple of {ways} (e.g. {lower or upper} or {upper})"
        )
    return global_batch // ways


# --------------------------------------------------------------------------- state, loss, step


def optimizer(learning_rate: float = 3e-3, steps: int = 1000):
    """AdamW (Optax) after clipping the gradients' global norm to 1; the learning rate warms up for
    ``steps // 10`` steps, then decays (cosine) to a tenth. Weight decay applies to the weight
    matrices and the embedding, not to the norms' scales (:func:`decays`: by name, since a layer's
    scales are stacked into a matrix of ``(n_layers, d_model)``)."""
    warmup = max(1, steps // 10)
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, learning_rate, warmup, max(steps, warmup + 1), learning_rate / 10
    )

    return optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, b1=0.9, b2=0.95, weight_decay=0.1, mask=decays)
    )


def decays(params):
    """True for every parameter weight decay applies to: all but the norms' scales (:func:`is_norm_scale`)."""
    return jax.tree_util.tree_map_with_path(lambda keys, _: not is_norm_scale(keys), params)


def is_norm_scale(keys) -> bool:
    """Whether the leaf at ``keys`` (a path of ``jax.tree_util`` keys) is an RMSNorm's scale, stacked or not."""
    return _path(keys).endswith("norm/weight")


def _new_state(cfg: Config, tx, seed: int) -> dict:
    model = LM(cfg, nnx.Rngs(seed))
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    return {"params": params, "opt_state": tx.init(params), "step": jnp.zeros((), jnp.int32)}


def graphdef(cfg: Config):
    """The model's structure without its values (static: what ``nnx.merge`` needs besides params)."""
    return nnx.graphdef(nnx.eval_shape(lambda: LM(cfg, nnx.Rngs(0))))


def abstract_state(cfg: Config, tx, seed: int = 0):
    """Shapes and dtypes of the train state, computed without allocating it."""
    return jax.eval_shape(lambda: _new_state(cfg, tx, seed))


def init_state(cfg: Config, tx, seed: int = 0, mesh=None, rules: Mapping[str, Any] = RULES) -> dict:
    """The train state ``{"params", "opt_state", "step"}``, created directly in its shards on ``mesh``."""
    if mesh is None:
        return jax.jit(lambda: _new_state(cfg, tx, seed))()
    out = shardings(abstract_state(cfg, tx, seed), rules, mesh)
    return jax.jit(lambda: _new_state(cfg, tx, seed), out_shardings=out)()


def model_from(cfg: Config, params):
    """An ``LM`` holding ``params`` (a nested dict of arrays)."""
    return nnx.merge(graphdef(cfg), params)


def loss_fn(params, graph, batch: Mapping[str, Any], *, remat=False, activations=None):
    """Mean next-token cross-entropy (nats per token) of the model ``graph`` + ``params``, in float32.

    ``remat``: False, or the ``jax.checkpoint`` policy for each layer (:func:`remat_policy`);
    ``activations``: the residual stream's sharding between layers (None: the compiler's choice).
    """
    logits = nnx.merge(graph, params)(batch["inputs"], remat=remat, activations=activations)
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), batch["targets"]).mean()


def train_step(state: dict, batch: Mapping[str, Any], *, graph, tx, remat=False, activations=None):
    """One optimizer step: gradients of the loss (f32, as the master weights), then AdamW."""
    loss, grads = jax.value_and_grad(loss_fn)(state["params"], graph, batch, remat=remat, activations=activations)
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    params = optax.apply_updates(state["params"], updates)
    return {"params": params, "opt_state": opt_state, "step": state["step"] + 1}, loss


def make_train_step(
    cfg: Config, tx, mesh, rules: Mapping[str, Any] = RULES, *, remat="none", donate: bool = True, abstract=None
):
    """``jax.jit(train_step)`` with the state's and the batch's shardings from ``rules`` on ``mesh``.

    ``remat`` is a policy name (:data:`POLICIES`) or a ``jax.checkpoint_policies`` function;
    ``donate=True`` lets the new state reuse the old state's memory (``donate_argnums``).
    Lower and compile it ahead of time with ``.lower(state, batch).compile()``.
    """
    abstract = abstract if abstract is not None else abstract_state(cfg, tx)
    state_sh = shardings(abstract, rules, mesh)
    batch_sh = batch_sharding(mesh, rules)

    residual = NamedSharding(mesh, spec_for(("batch", "length", "act_embed"), rules, mesh))  # between layers
    step = functools.partial(train_step, graph=graphdef(cfg), tx=tx, remat=remat_policy(remat), activations=residual)
    return jax.jit(
        step,
        in_shardings=(state_sh, {"inputs": batch_sh, "targets": batch_sh}),
        out_shardings=(state_sh, NamedSharding(mesh, spec_for((), rules, mesh))),
        donate_argnums=(0,) if donate else (),
    )


def eval_step(cfg: Config):
    """A compiled held-out loss: ``eval_step(cfg)(params, batch)``."""
    graph = graphdef(cfg)
    return jax.jit(lambda params, batch: loss_fn(params, graph, batch))


# --------------------------------------------------------------------------- checkpoints (Orbax)


class CheckpointMismatch(ValueError):
    """A checkpoint directory holds another model's checkpoints; nothing was written or deleted."""


def checkpoint_path(directory: str | os.PathLike):
    """Where Orbax should write: a Cloud Storage URL (``gs://bucket/run``) kept as one, through
    ``etils.epath`` (what Orbax itself uses), a local folder made absolute. ``pathlib.Path`` would
    turn ``gs://bucket/run`` into the local folder ``gs:/bucket/run`` on every host."""
    from etils import epath

    path = epath.Path(directory)
    return path if "://" in str(directory) else path.absolute()


def _saved_config(directory) -> tuple[int, dict] | None:
    import orbax.checkpoint as ocp

    with ocp.CheckpointManager(
        directory, item_names=("state", "config"), options=ocp.CheckpointManagerOptions(create=False)
    ) as reader:
        step = reader.latest_step()
        if step is None:
            return None
        return step, dict(reader.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore())).config)


def checkpoint_manager(directory: str | os.PathLike, cfg: Config, *, save_every: int = 100, keep: int = 3):
    """An Orbax ``CheckpointManager`` for ``cfg``'s train state; refuses another model's directory.

    Saves (asynchronously) every ``save_every`` steps and keeps the newest ``keep``. If the
    directory already holds checkpoints of a different config, raises :class:`CheckpointMismatch`
    *before* anything is written, so none of them is overwritten or cleaned up.
    """
    import orbax.checkpoint as ocp

    directory = checkpoint_path(directory)
    if directory.exists() and any(directory.iterdir()):
        found = _saved_config(directory)
        if found is not None and Config.from_dict(found[1]) != cfg:
            step, saved = found
            diff = {k: (saved.get(k), v) for k, v in cfg.to_dict().items() if saved.get(k) != v}
            raise CheckpointMismatch(
                f"{directory} holds checkpoints (latest step {step}) of another model: "
                + ", ".join(f"{k}={old} there, {new} here" for k, (old, new) in diff.items())
                + f". Nothing was changed. Use a new directory for this model, or resume that run with "
                f"lm.Config.from_dict({saved})"
            )
    options = ocp.CheckpointManagerOptions(save_interval_steps=save_every, max_to_keep=keep, create=True)
    return ocp.CheckpointManager(directory, item_names=("state", "config"), options=options)


def save(manager, step: int, state: dict, cfg: Config, *, force: bool = False) -> bool:
    """Save ``state`` as checkpoint ``step`` if the manager's interval says so (or ``force``)."""
    import orbax.checkpoint as ocp

    return manager.save(
        step,
        force=force,
        args=ocp.args.Composite(state=ocp.args.StandardSave(state), config=ocp.args.JsonSave(cfg.to_dict())),
    )


def restore(manager, cfg: Config, target, step: int | None = None) -> dict:
    """The train state of checkpoint ``step`` (default: the latest), laid out like ``target``.

    ``target`` is the abstract state (``abstract_state``) or a tree of ShapeDtypeStructs carrying
    shardings: each array comes back in its shards on the mesh. A checkpoint of another config is a
    :class:`CheckpointMismatch` naming it.
    """
    import orbax.checkpoint as ocp

    step = manager.latest_step() if step is None else step
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {manager.directory}: train first, or pass another directory")
    saved = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore())).config
    if Config.from_dict(saved) != cfg:
        raise CheckpointMismatch(
            f"checkpoint {step} in {manager.directory} is of {Config.from_dict(saved)}, "
            f"not {cfg}: restore it with lm.Config.from_dict(...) of the saved config"
        )
    target = jax.tree.map(
        lambda t: jax.ShapeDtypeStruct(t.shape, t.dtype, sharding=getattr(t, "sharding", None)), target
    )
    return manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target))).state


def load(directory: str | os.PathLike, step: int | None = None):
    """``(config, model)`` from a training run's checkpoint (the latest unless ``step``), on one device.

    The config comes from the checkpoint itself, so a serving process needs nothing else.
    """
    import orbax.checkpoint as ocp

    directory = checkpoint_path(directory)
    found = _saved_config(directory)
    if found is None:
        raise FileNotFoundError(f"no checkpoint in {directory}: train first (lm.train, or lesson 08a (training))")
    cfg = Config.from_dict(found[1])
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    target = jax.tree.map(
        lambda t: jax.ShapeDtypeStruct(t.shape, t.dtype, sharding=device), abstract_state(cfg, optimizer())
    )
    with ocp.CheckpointManager(
        directory, item_names=("state", "config"), options=ocp.CheckpointManagerOptions(create=False)
    ) as manager:
        state = restore(manager, cfg, target, found[0] if step is None else step)
    return cfg, model_from(cfg, state["params"])


# --------------------------------------------------------------------------- sampling


def generate(model, prompt: str, length: int = 200, *, temperature: float = 0.8, seed: int = 0) -> str:
    """``prompt`` continued by ``length`` sampled tokens (bytes; a sliding window of ``seq_len``)."""
    seq_len = model.cfg.max_len
    graph, params = nnx.split(model)

    @jax.jit
    def next_token(params, window, t, key):
        logits = nnx.merge(graph, params)(window[None])[0, t - 1].astype(jnp.float32)
        return jax.random.categorical(key, logits / max(temperature, 1e-4))

    ids = list(encode(prompt)) or [ord("\n")]
    key = jax.random.key(seed)
    for _ in range(length):
        context = ids[-seq_len:]
        window = np.zeros(seq_len, np.int32)
        window[: len(context)] = context
        key, sub = jax.random.split(key)
        ids.append(int(next_token(params, jnp.asarray(window), len(context), sub)))
    return decode(ids[len(encode(prompt)) :])


# --------------------------------------------------------------------------- the training loop


def train(
    cfg: Config,
    *,
    steps: int,
    batch: int,
    mesh=None,
    rules: Mapping[str, Any] = RULES,
    ckpt_dir: str | os.PathLike | None = None,
    save_every: int = 10,
    seed: int = 0,
    learning_rate: float = 3e-3,
    schedule_steps: int | None = None,
    corpus_chars: int = 2_000_000,
    remat="none",
    on_step: Callable[[int, float], None] | None = None,
    data_dir: str | os.PathLike | None = None,
) -> dict[int, float]:
    """Train up to step ``steps`` (resuming from ``ckpt_dir``'s latest checkpoint); return {step: loss}.

    ``schedule_steps`` (default ``steps``) is the length the learning-rate schedule is laid out for,
    so a run can stop early and still take exactly the steps a longer run takes.

    The same loop as the lesson's, condensed: every process of a multi-host run calls it with the
    same arguments; each reads its own slice of the data (:func:`dataset`), or with ``data_dir``
    its own files of a folder of shards (:func:`read_shards`), ``batch // process_count`` rows a step.
    After ``jax.distributed.initialize()``, a SIGTERM to any process makes every process save a
    checkpoint at the same step (Orbax's preemption sync point) and return early: the returned
    losses then end before ``steps``.
    """
    mesh = mesh if mesh is not None else make_mesh(data=jax.device_count())
    check_batch(batch, mesh, rules)
    tx = optimizer(learning_rate, schedule_steps or steps)
    if data_dir is not None:  # this host's files only, its rows of every global batch
        ds = dataset(read_shards(data_dir), cfg.seq_len, batch // jax.process_count(), seed=seed)
    else:
        text, _, _ = stdlib_corpus(corpus_chars)
        ds = dataset(
            encode(text),
            cfg.seq_len,
            batch,
            seed=seed,
            process_index=jax.process_index(),
            process_count=jax.process_count(),
        )
    abstract = abstract_state(cfg, tx, seed)
    step_fn = make_train_step(cfg, tx, mesh, rules, remat=remat, abstract=abstract)
    manager = checkpoint_manager(ckpt_dir, cfg, save_every=save_every) if ckpt_dir is not None else None
    if manager is not None and manager.latest_step() is not None:
        target = jax.tree.map(
            lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings(abstract, rules, mesh)
        )
        state = restore(manager, cfg, target)
    else:
        state = init_state(cfg, tx, seed, mesh, rules)
    start = int(state["step"])
    losses: dict[int, float] = {}
    preempted = False
    batches = device_prefetch(iter(ds[start:]), batch_sharding(mesh, rules))
    try:
        for s in range(start, steps):
            state, loss = step_fn(state, next(batches))
            losses[s + 1] = float(loss)
            if manager is not None:
                save(manager, s + 1, state, cfg)  # at a preemption sync point Orbax saves whatever the interval
            if on_step is not None:
                on_step(s + 1, losses[s + 1])
            if manager is not None and manager.reached_preemption(s + 1):  # every process stops at this step
                preempted = True
                break
        if manager is not None:
            manager.wait_until_finished()
            if (
                not preempted and start < steps and steps not in manager.all_steps()
            ):  # the last step, whatever the interval
                save(manager, steps, state, cfg, force=True)
                manager.wait_until_finished()
    finally:
        batches.close()
        if manager is not None:
            manager.close()
    return losses


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tpututor.lm train ...``: train in this process, one JSON line per step on stdout."""
    parser = argparse.ArgumentParser(prog="python -m tpututor.lm", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train (and resume from --ckpt-dir), printing {'step', 'loss'} lines")
    t.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    t.add_argument("--config", help="a JSON Config overriding --profile")
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--ckpt-dir")
    t.add_argument("--save-every", type=int, default=10)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--schedule-steps", type=int, default=None, help="steps the learning-rate schedule spans")
    t.add_argument("--corpus-chars", type=int, default=2_000_000)
    t.add_argument("--mesh", default=None, help="data,fsdp,tensor sizes (default: every device on data)")
    t.add_argument("--cpu-devices", type=int, default=None, help="simulate this many CPU devices in this process")
    t.add_argument("--coordinator", help="host:port of process 0, for a multi-process run")
    t.add_argument("--num-processes", type=int, default=1)
    t.add_argument("--process-id", type=int, default=0)
    t.add_argument(
        "--distributed",
        action="store_true",
        help="first call jax.distributed.initialize() with no topology arguments: on a TPU slice the "
        "runtime supplies it, under `python -m tpututor launch` the environment; then only "
        "process 0 prints progress",
    )
    t.add_argument("--data-dir", help="a folder (or gs:// path) of lm.write_shards files; each process reads its own")
    t.add_argument("--logdir", help="write loss and seconds per step as TensorBoard event files here (process 0)")
    args = parser.parse_args(argv)

    if args.cpu_devices:
        jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    if args.coordinator:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=args.coordinator, num_processes=args.num_processes, process_id=args.process_id
        )
    if args.distributed:
        options = hosts.initialize_options(accepted=inspect.signature(jax.distributed.initialize).parameters)
        jax.distributed.initialize(**options)  # + the launcher's short timeouts, if any
        print(
            json.dumps(
                {
                    "process": jax.process_index(),
                    "processes": jax.process_count(),
                    "devices": jax.device_count(),
                    "local_devices": jax.local_device_count(),
                }
            ),
            flush=True,
        )
    cfg = Config.from_dict(json.loads(args.config)) if args.config else PROFILES[args.profile]
    mesh = make_mesh(*map(int, args.mesh.split(","))) if args.mesh else None

    lead = jax.process_index() == 0 or not args.distributed  # who prints progress and writes metrics
    writer = None
    if args.logdir and jax.process_index() == 0:
        writer = tblog.Writer(args.logdir)
    last = [time.perf_counter()]

    def report(step: int, loss: float) -> None:
        now = time.perf_counter()
        if writer is not None:
            writer.scalars(step, {"loss": loss, "step_seconds": now - last[0]})
        last[0] = now
        if lead:
            print(json.dumps({"step": step, "loss": loss, "process": jax.process_index()}), flush=True)

    start = time.perf_counter()
    try:
        losses = train(
            cfg,
            steps=args.steps,
            batch=args.batch,
            mesh=mesh,
            ckpt_dir=args.ckpt_dir,
            save_every=args.save_every,
            seed=args.seed,
            learning_rate=args.lr,
            schedule_steps=args.schedule_steps,
            corpus_chars=args.corpus_chars,
            on_step=report,
            data_dir=args.data_dir,
        )
    finally:
        if writer is not None:
            writer.close()
    if losses and max(losses) < args.steps:  # a preemption signal: every process saved this step and stopped
        print(json.dumps({"preempted": max(losses), "process": jax.process_index()}), flush=True)
    print(json.dumps({"done": True, "seconds": round(time.perf_counter() - start, 2)}), flush=True)
    if args.coordinator or args.distributed:
        jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
