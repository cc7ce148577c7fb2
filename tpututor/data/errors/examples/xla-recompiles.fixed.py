import os
os.environ["PT_XLA_DEBUG"] = "1"
import torch
import torch_xla

device = torch_xla.device()
embed = torch.nn.Embedding(1000, 32).to(device)
for n in range(8, 24):
    batch = torch.nn.functional.pad(torch.randint(0, 1000, (4, n)), (0, 32 - n))  # one bucket: 32
    out = embed(batch.to(device)).mean()
    torch_xla.sync()
