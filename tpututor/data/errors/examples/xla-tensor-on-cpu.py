import torch
import torch_xla

device = torch_xla.device()
model = torch.nn.Linear(4, 2).to(device)
model(torch.randn(3, 4))  # the batch is still on the CPU
