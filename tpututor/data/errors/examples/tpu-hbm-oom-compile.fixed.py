import jax.numpy as jnp

from tpututor import aot

v = aot.abstract((2**16,), jnp.float32, aot.mesh("v5e-1"))
fused = aot.compile(lambda v: jnp.outer(v, v).min(axis=0), v, slice="v5e-1")  # the same first row
print(fused.summary())
assert fused.fits
