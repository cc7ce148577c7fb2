import os
os.environ["PT_XLA_DEBUG"] = "1"  # ask PyTorch/XLA to report what it sees
import torch
import torch_xla

device = torch_xla.device()
embed = torch.nn.Embedding(1000, 32).to(device)
for n in range(8, 24):  # a new sequence length every step
    out = embed(torch.randint(0, 1000, (4, n)).to(device)).mean()
    torch_xla.sync()
