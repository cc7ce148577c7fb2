import jax.numpy as jnp

x = jnp.zeros(4)
x[0] = 1.0  # in place, as in NumPy or PyTorch
