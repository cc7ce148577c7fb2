import jax.numpy as jnp

x = jnp.zeros(4)
x = x.at[0].set(1.0)  # a new array
assert x.tolist() == [1.0, 0.0, 0.0, 0.0]
