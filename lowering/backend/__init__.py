"""kegen's Triton backend for target `mtia` (found through the `triton.backends` entry point).

Triton imports `lowering.backend.compiler` (one concrete `BaseBackend`) and
`lowering.backend.driver` (one concrete `DriverBase`, active only on machines without a GPU).
"""

# Import Triton's backend registry before our submodules: its discovery imports
# `lowering.backend.compiler` / `.driver` itself. Without this, `import lowering.backend.driver`
# in a fresh process would start Triton's discovery halfway through defining the driver class
# (a circular import that fails with "Found 0 concrete subclasses of DriverBase").
import triton.backends  # noqa: E402,F401
