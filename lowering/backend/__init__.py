"""kegen's Triton backend for target `mtia` (found through the `triton.backends` entry point).

Triton imports `lowering.backend.compiler` (one concrete `BaseBackend`) and
`lowering.backend.driver` (one concrete `DriverBase`, active only on machines without a GPU).
"""
