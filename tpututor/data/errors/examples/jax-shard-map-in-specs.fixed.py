import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
total = jax.shard_map(lambda x: jax.lax.psum(x.sum(), "data"), mesh=mesh, in_specs=P("data"), out_specs=P())
x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("data")))  # where in_specs says it is
assert float(total(x)) == 28.0
