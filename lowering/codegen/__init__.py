"""LLVM IR emission (llvmlite) for the PE control core, and RISC-V object emission."""
