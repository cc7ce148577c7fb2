import os
os.environ["PT_XLA_DEBUG"] = "1"  # report problems as they happen (else: read the metrics)
import torch
import torch_xla
import torch_xla.debug.metrics as met

device = torch_xla.device()
values = torch.randn(4096, device=device)
counts = torch.histc(values, bins=8, min=-3, max=3)  # no XLA lowering: computed on the CPU
torch_xla.sync()
print(met.metrics_report())
