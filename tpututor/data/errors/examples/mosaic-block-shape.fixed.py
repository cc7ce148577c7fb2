import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from tpututor import aot


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, block):
    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // block[0], x.shape[1] // block[1]), in_specs=[spec, spec],
                          out_specs=spec)(x, y)


x = aot.abstract((16, 200), jnp.float32, aot.mesh("v5e-1"))
print(aot.compile(functools.partial(add, block=(8, 200)), x, x, slice="v5e-1").summary())  # 8 rows, all 200
