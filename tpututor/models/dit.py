"""A small class-conditional Diffusion Transformer (DiT) in Flax NNX, trained by flow matching.

Lesson 12a (image generation) writes each piece in its cells; lesson 12b (diffusion at scale) rebuilds
the same model from here in a few lines, then samples it over eight devices and sizes DiT-XL/2::

    tokens = patches of the image                        (patch x patch pixels each)
    h = embed(tokens) + position
    c = time_mlp(sin/cos(t)) + label_embedding(y)        (label ``classes`` means "no label")
    for each block (stacked, run under jax.lax.scan):
        h = h + gate * attention(norm(h) * (1 + scale) + shift)      adaLN-Zero: shift, scale and
        h = h + gate * mlp(norm(h) * (1 + scale) + shift)            gate come from c, zero at init
    velocity = out(norm(h) * (1 + scale) + shift), back to the image's shape

Flow matching trains the model to predict ``x1 - x0``, the velocity from noise ``x0`` to an image
``x1``, at a point ``(1 - t) * x0 + t * x1`` between them; sampling integrates that velocity from
noise with Euler steps, inside one compiled ``jax.lax.fori_loop``. Classifier-free guidance runs
each image with and without its label in one doubled batch, each row beside its twin (:func:`pair`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

__all__ = [
    "FONTS",
    "Block",
    "DiT",
    "font_digits",
    "flow_matching_loss",
    "train",
    "pair",
    "guided_velocity",
    "sampler",
]

FONTS = (
    ("DejaVu Sans", "normal"),
    ("DejaVu Sans", "bold"),
    ("DejaVu Serif", "normal"),
    ("DejaVu Sans Mono", "normal"),
    ("cmss10", "normal"),
    ("STIXGeneral", "bold"),
)  # fonts matplotlib ships, so every machine draws the same digits


class Block(nnx.Module):
    """A DiT block: attention and an MLP, each modulated by the conditioning (adaLN-Zero)."""

    def __init__(self, d: int, heads: int, dtype, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(heads, d, decode=False, **kw)
        self.mlp1, self.mlp2 = nnx.Linear(d, 4 * d, **kw), nnx.Linear(4 * d, d, **kw)
        self.mod = nnx.Linear(d, 6 * d, kernel_init=nnx.initializers.zeros, **kw)  # zero: the block starts as identity
        self.norm1 = nnx.LayerNorm(d, use_scale=False, use_bias=False, **kw)
        self.norm2 = nnx.LayerNorm(d, use_scale=False, use_bias=False, **kw)

    def __call__(self, h, c):
        shift1, scale1, gate1, shift2, scale2, gate2 = jnp.split(self.mod(nnx.silu(c))[:, None], 6, axis=-1)
        h = h + gate1 * self.attn(self.norm1(h) * (1 + scale1) + shift1)
        return h + gate2 * self.mlp2(nnx.gelu(self.mlp1(self.norm2(h) * (1 + scale2) + shift2)))


class DiT(nnx.Module):
    """A class-conditional Diffusion Transformer: (images, times, labels) -> velocities of the images' shape.

    Images are (batch, size, size, channels), or (batch, size, size) with ``channels=1``; times are
    (batch,) in [0, 1]; labels (batch,) in [0, classes], where ``classes`` (``self.null``) means none.
    """

    def __init__(
        self,
        size: int = 16,
        channels: int = 1,
        patch: int = 4,
        d: int = 64,
        depth: int = 3,
        heads: int = 4,
        classes: int = 10,
        dtype=jnp.float32,
        unroll: int | bool = 1,
        *,
        rngs: nnx.Rngs,
    ):
        if size % patch or d % 2:
            raise ValueError(f"size ({size}) must be a multiple of patch ({patch}), and d ({d}) even")
        self.size, self.channels, self.patch, self.d, self.null, self.unroll = size, channels, patch, d, classes, unroll
        kw = dict(dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.embed = nnx.Linear(patch * patch * channels, d, **kw)
        self.pos = nnx.Param(jax.random.normal(rngs.params(), ((size // patch) ** 2, d), dtype) * 0.02)
        self.label = nnx.Embed(classes + 1, d, dtype=dtype, param_dtype=dtype, rngs=rngs)  # + 1: "no label"
        self.time1, self.time2 = nnx.Linear(d, d, **kw), nnx.Linear(d, d, **kw)

        @nnx.split_rngs(splits=depth)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def blocks(rngs):
            return Block(d, heads, dtype, rngs)

        self.blocks = blocks(rngs)  # depth blocks, weights stacked on axis 0
        self.norm = nnx.LayerNorm(d, use_scale=False, use_bias=False, **kw)
        self.mod = nnx.Linear(d, 2 * d, kernel_init=nnx.initializers.zeros, **kw)
        self.out = nnx.Linear(d, patch * patch * channels, kernel_init=nnx.initializers.zeros, **kw)

    def __call__(self, x, t, y):
        B, p, g, C = x.shape[0], self.patch, self.size // self.patch, self.channels
        tokens = x.reshape(B, g, p, g, p, C).transpose(0, 1, 3, 2, 4, 5).reshape(B, g * g, p * p * C)
        h = self.embed(tokens) + self.pos
        freq = jnp.exp(-jnp.log(1000.0) * jnp.arange(self.d // 2) / (self.d // 2)) * 1000 * t[:, None]
        c = self.time2(nnx.silu(self.time1(jnp.concatenate([jnp.sin(freq), jnp.cos(freq)], -1).astype(h.dtype))))
        c = c + self.label(y)
        block_def, stacked = nnx.split(self.blocks)

        def layer(h, weights):  # one block's weights per iteration
            return nnx.merge(block_def, weights)(h, c), None

        h, _ = jax.lax.scan(layer, h, stacked, unroll=self.unroll)
        shift, scale = jnp.split(self.mod(nnx.silu(c))[:, None], 2, axis=-1)
        h = self.out(self.norm(h) * (1 + scale) + shift)
        return h.reshape(B, g, g, p, p, C).transpose(0, 1, 3, 2, 4, 5).reshape(x.shape)


def font_digits(size: int = 16, fonts=FONTS) -> tuple[jax.Array, jax.Array]:
    """Every digit in each font, drawn straight at size x size pixels (paper -1, ink 1), and the labels:
    ((10 * len(fonts), size, size) float32, (10 * len(fonts),) int32). Needs matplotlib."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plt.figure(figsize=(1, 1), dpi=size)
    canvas = FigureCanvasAgg(fig)
    images = []
    for family, weight in fonts:
        for digit in range(10):
            fig.clf()
            fig.text(0.5, 0.38, str(digit), ha="center", va="center", fontsize=72, family=family, weight=weight)
            canvas.draw()
            images.append(1 - np.asarray(canvas.buffer_rgba())[..., 0] / 127.5)
    plt.close(fig)
    return jnp.asarray(np.array(images, np.float32)), jnp.tile(jnp.arange(10, dtype=jnp.int32), len(fonts))


def flow_matching_loss(model: DiT, x1, y, key):
    """The velocity error at a random time between noise and the images ``x1``; 10% of labels dropped."""
    k_noise, k_time, k_drop = jax.random.split(key, 3)
    x0 = jax.random.normal(k_noise, x1.shape)
    t = jax.random.uniform(k_time, (x1.shape[0],))
    y = jnp.where(jax.random.uniform(k_drop, y.shape) < 0.1, model.null, y)  # 10% unconditional
    t_ = t.reshape((-1,) + (1,) * (x1.ndim - 1))
    xt = (1 - t_) * x0 + t_ * x1
    return jnp.mean((model(xt, t, y) - (x1 - x0)) ** 2)


def train(
    model: DiT, images, labels, steps: int, *, batch: int = 64, jitter: int = 1, seed: int = 0, peak_lr: float = 3e-3
) -> tuple[DiT, list[float]]:
    """``steps`` AdamW steps of flow matching on random batches of ``images`` (each moved up to
    ``jitter`` pixels each way); the trained model and the loss every 50 steps (and the last)."""
    if not isinstance(steps, int) or steps < 100:
        raise ValueError(f"steps must be an int of at least 100 (the schedule warms up for 50), got {steps!r}")
    schedule = optax.warmup_cosine_decay_schedule(0.0, peak_lr, 50, steps, 1e-4)
    graphdef, state = nnx.split((model, nnx.Optimizer(model, optax.adamw(schedule), wrt=nnx.Param)))
    images, labels = jnp.asarray(images), jnp.asarray(labels)

    @jax.jit
    def step(state, key):
        model, optimizer = nnx.merge(graphdef, state)
        k_batch, k_move, k_loss = jax.random.split(key, 3)
        pick = jax.random.randint(k_batch, (batch,), 0, images.shape[0])
        moves = jax.random.randint(k_move, (batch, 2), -jitter, jitter + 1)
        x1 = jax.vmap(lambda image, move: jnp.roll(image, move, axis=(0, 1)))(images[pick], moves)
        loss, grads = nnx.value_and_grad(flow_matching_loss)(model, x1, labels[pick], k_loss)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), loss

    losses = []
    for i in range(steps):
        state, loss = step(state, jax.random.fold_in(jax.random.key(seed), i))
        if i % 50 == 0 or i == steps - 1:
            losses.append(float(loss))  # reading a value waits for the device: only every 50 steps
    model, _ = nnx.merge(graphdef, state)
    return model, losses


def pair(a, b):
    """Two batches interleaved row by row: a0, b0, a1, b1, ... (each image beside its twin)."""
    return jnp.stack([a, b], axis=1).reshape((-1,) + a.shape[1:])


def guided_velocity(velocity_fn, x, t, y, w, null):
    """Classifier-free guidance in one call of 2B rows: v_none + w * (v_label - v_none)."""
    v = velocity_fn(pair(x, x), pair(t, t), pair(y, jnp.full_like(y, null)))
    v = v.reshape((x.shape[0], 2) + x.shape[1:])
    v_label, v_none = v[:, 0], v[:, 1]
    return v_none + w * (v_label - v_none)


def sampler(model_def, null: int):
    """``sample(params, noise, labels, w, steps)``: guided Euler steps from noise, the whole loop one
    jitted program (``jax.lax.fori_loop``); ``model_def`` and ``params`` from ``nnx.split(model)``."""

    def velocity(params, x, t, y):
        return nnx.merge(model_def, params)(x, t, y)

    @functools.partial(jax.jit, static_argnames="steps")
    def sample(params, noise, y, w, steps):
        dt = 1.0 / steps
        net = functools.partial(velocity, params)

        def body(i, x):
            t = jnp.full((x.shape[0],), i * dt)
            return x + dt * guided_velocity(net, x, t, y, w, null)

        return jax.lax.fori_loop(0, steps, body, noise)

    return sample
