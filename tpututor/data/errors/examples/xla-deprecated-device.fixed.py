import torch_xla

device = torch_xla.device()
torch_xla.sync()
