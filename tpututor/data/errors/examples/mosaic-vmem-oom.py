import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpututor import aot


def copy_kernel(x_ref, o_ref):
    pltpu.sync_copy(x_ref, o_ref)


def copy(x, rows=2048):  # a (2048, 8192) float32 block: 64 MiB, held twice for the input and twice for the output
    spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
                          in_specs=[spec], out_specs=spec)(x)


x = aot.abstract((8192, 8192), jnp.float32, aot.mesh("v5e-1"))  # for a TPU v5e: nothing runs
try:
    aot.compile(copy, x, slice="v5e-1")
except aot.CompileError as err:
    print(err.message)
