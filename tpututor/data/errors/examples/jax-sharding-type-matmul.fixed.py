import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Explicit))
x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("data", "model")))
with jax.set_mesh(mesh):
    gram = jnp.matmul(x, x.T, out_sharding=P("data", None))  # you say where the result lives
assert gram.sharding.spec == P("data", None) and jax.device_get(gram)[0, 0] == 8.0
