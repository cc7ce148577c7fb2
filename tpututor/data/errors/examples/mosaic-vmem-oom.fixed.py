import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpututor import aot


def copy_kernel(x_ref, o_ref):
    pltpu.sync_copy(x_ref, o_ref)


def copy(x, rows):
    spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
                          in_specs=[spec], out_specs=spec)(x)


x = aot.abstract((8192, 8192), jnp.float32, aot.mesh("v5e-1"))
print(aot.compile(functools.partial(copy, rows=64), x, slice="v5e-1").summary())  # 2 MiB blocks: 8 MiB
