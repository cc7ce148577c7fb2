from jax.experimental.shard_map import shard_map  # the old home
