import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpututor import aot


def kernel(x_ref, y_ref, o_ref, acc_ref):
    acc_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          scratch_shapes=[pltpu.VMEM(x.shape, jnp.float32)])(x, y)


x = aot.abstract((256, 256), jnp.bfloat16, aot.mesh("v5e-1"))
print(aot.compile(matmul, x, x, slice="v5e-1").summary())
