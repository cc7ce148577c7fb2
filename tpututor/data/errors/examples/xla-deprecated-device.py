import torch_xla.core.xla_model as xm

device = xm.xla_device()  # the names in older tutorials
xm.mark_step()
