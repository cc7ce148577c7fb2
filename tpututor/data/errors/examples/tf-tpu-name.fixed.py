import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")  # the chips on this VM
