"""The small Diffusion Transformer of lessons 12a (image generation) and 12b (diffusion at scale): its
shapes, its adaLN-Zero start, guidance as one doubled batch, and training that lowers the loss."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tpututor.models import dit


def test_a_fresh_dit_predicts_zero_velocity_of_the_images_shape():
    model = dit.DiT(size=8, patch=4, d=16, depth=2, heads=2, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (3, 8, 8))
    v = model(x, jnp.array([0.1, 0.5, 0.9]), jnp.array([0, 3, model.null]))
    assert v.shape == x.shape
    assert float(jnp.abs(v).max()) == 0.0, "adaLN-Zero: the output layer starts at zero"


def test_guidance_weight_one_is_the_conditional_velocity_and_zero_the_unconditional():
    def velocity(x, t, y):  # a stand-in model whose velocity depends on the label
        return x * t[:, None, None] + y[:, None, None].astype(x.dtype)

    x, t, y = jnp.ones((2, 4, 4)), jnp.array([0.5, 0.25]), jnp.array([2, 7])
    np.testing.assert_allclose(dit.guided_velocity(velocity, x, t, y, 1.0, 10), velocity(x, t, y))
    np.testing.assert_allclose(dit.guided_velocity(velocity, x, t, y, 0.0, 10), velocity(x, t, jnp.full_like(y, 10)))
    assert dit.pair(jnp.array([1, 2]), jnp.array([3, 4])).tolist() == [1, 3, 2, 4]


def test_training_lowers_the_flow_matching_loss_and_the_sampler_keeps_the_shape():
    images = jnp.asarray(np.random.default_rng(0).choice([-1.0, 1.0], size=(20, 8, 8)), jnp.float32)
    labels = jnp.arange(20, dtype=jnp.int32) % 10
    model = dit.DiT(size=8, patch=4, d=16, depth=1, heads=2, rngs=nnx.Rngs(0))
    model, losses = dit.train(model, images, labels, 150, batch=16)
    assert losses[-1] < losses[0]
    model_def, params = nnx.split(model)
    out = dit.sampler(model_def, model.null)(params, jnp.zeros((4, 8, 8)), labels[:4], 2.0, 3)
    assert out.shape == (4, 8, 8) and bool(jnp.isfinite(out).all())


def test_too_few_training_steps_is_a_clear_error():
    model = dit.DiT(size=8, patch=4, d=16, depth=1, heads=2, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="at least 100"):
        dit.train(model, jnp.zeros((4, 8, 8)), jnp.zeros(4, jnp.int32), 10)
