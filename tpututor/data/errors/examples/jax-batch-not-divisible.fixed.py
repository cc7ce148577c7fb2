import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
batch = jnp.ones((6, 16))
rows = -(-batch.shape[0] // mesh.shape["data"]) * mesh.shape["data"]  # round up to a multiple of 4
padded = jnp.pad(batch, ((0, rows - batch.shape[0]), (0, 0)))  # mask the padding out of the loss
assert jax.device_put(padded, NamedSharding(mesh, P("data"))).shape == (8, 16)
