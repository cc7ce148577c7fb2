import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Explicit))
table = jax.device_put(jnp.ones((64, 16)), NamedSharding(mesh, P(None, "model")))
tokens = jax.device_put(jnp.zeros((8, 5), jnp.int32), NamedSharding(mesh, P("data", None)))
with jax.set_mesh(mesh):
    vectors = table.at[tokens].get(out_sharding=P("data", None, "model"))  # you say where it lives
assert vectors.shape == (8, 5, 16)
