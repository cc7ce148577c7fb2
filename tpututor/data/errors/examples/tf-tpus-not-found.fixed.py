import tensorflow as tf

try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    strategy = tf.distribute.TPUStrategy(resolver)
except tf.errors.NotFoundError:  # no TPU here: use the GPUs, or the CPU
    strategy = tf.distribute.MirroredStrategy()
assert strategy.num_replicas_in_sync >= 1
