import tensorflow as tf
import torch_xla  # aborts the process: LLVM ERROR
