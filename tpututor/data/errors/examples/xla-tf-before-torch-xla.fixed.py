import torch_xla  # first
import tensorflow as tf
