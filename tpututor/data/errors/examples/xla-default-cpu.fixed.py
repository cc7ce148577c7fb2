import os
os.environ["PJRT_DEVICE"] = "CPU"  # or "TPU" on a TPU VM
import torch_xla

print(torch_xla.device())
