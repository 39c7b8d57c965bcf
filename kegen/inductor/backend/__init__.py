"""Triton backend `cpu` for TorchInductor: Inductor's Triton kernels for CPU tensors run on mtia_sim.

With `torch._inductor.config.cpu_backend = "triton"`, Inductor compiles its kernels for a Triton target
named `cpu` and asks Triton's registry for a backend of that name. This package is that backend: its
compiler is kegen's `mtia` compiler retargeted to the current machine (`KEGEN_MACHINE`, else mtia-2i)
and its driver is the `mtia` driver, so every launch lands on `mtia_sim` and in
`lowering.backend.driver.launch_history()`. It is found through the `triton.backends` entry point
`cpu`, or registered at run time by `kegen.inductor.enable()`.
"""

import triton.backends  # noqa: F401  (Triton's registry first; see lowering.backend)
