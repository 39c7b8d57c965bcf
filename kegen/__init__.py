"""kegen: search for fast, correct accelerator kernels (KernelEvolve-style), with a simulated MTIA target."""

__version__ = "0.1.0"
