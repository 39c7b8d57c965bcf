"""A fix for Triton 3.6's CPU interpreter (``TRITON_INTERPRET=1``) under NumPy 2, shared by every
place that runs kernels in it (corpus checks, suite seeds, knowledge samples)."""

from __future__ import annotations

from typing import Any

__all__ = ["patch_scalar_index"]


def patch_scalar_index() -> None:
    """Let the interpreter use runtime ints in ``range()``: it keeps scalars as 1-element arrays and
    converts them with ``int(array)``, which NumPy >= 2 refuses for 1-D arrays ("only 0-dimensional
    arrays can be converted"). The tensor's ``__index__`` goes through the single element instead.
    Idempotent; affects only this process."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "_kegen_patched", False):
        return

    def patched(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0].item()))

    patched._kegen_patched = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patched
