import torch
import torch_xla

device = torch_xla.device()
model = torch.nn.Linear(4, 2).to(device)
out = model(torch.randn(3, 4).to(device))
assert out.device.type == "xla"
