"""lowering: Triton TTIR → kegen tile IR → LLVM → RISC-V for the simulated MTIA, as a Triton backend."""
