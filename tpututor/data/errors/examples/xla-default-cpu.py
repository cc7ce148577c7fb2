import os
os.environ.pop("PJRT_DEVICE", None)  # nothing said
import torch_xla

print(torch_xla.device())
