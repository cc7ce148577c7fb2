import tensorflow as tf

tf.distribute.cluster_resolver.TPUClusterResolver()  # asks for a TPU node by name
