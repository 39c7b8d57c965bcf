"""The lowering's errors live in `lowering.errors` (shared by passes and codegen); re-exported here."""

from lowering.errors import LocalStoreOverflowError, LoweringError, UnsupportedError

__all__ = ["LoweringError", "UnsupportedError", "LocalStoreOverflowError"]
