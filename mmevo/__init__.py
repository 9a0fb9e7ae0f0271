"""mmevo: label-free GRPO for vision-language models."""

from mmevo import torchvision_shim as _torchvision_shim

_torchvision_shim.apply()  # before anything imports torchvision (transformers does, whenever it is installed)
