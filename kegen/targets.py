"""The targets kegen evaluates on, named once (a leaf module: it imports nothing).

mtia is the simulated MTIA chip (lowering + mtia_sim); nvidia and amd are GPUs through Triton's own
backends; cpu runs the PyTorch reference path only.
"""

TARGETS = ("mtia", "nvidia", "amd", "cpu")
GPU_TARGETS = ("nvidia", "amd")
