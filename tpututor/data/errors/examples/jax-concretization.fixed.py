import jax
import jax.numpy as jnp

def first(x, n):
    return x[:n]

first_jit = jax.jit(first, static_argnames="n")  # n is a Python int: one compile per value
assert first_jit(jnp.arange(10), 3).tolist() == [0, 1, 2]
