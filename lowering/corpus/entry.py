"""`CorpusEntry`: one test kernel with everything needed to compile it and to check it numerically."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from lowering.ir.module import Module

__all__ = ["CorpusEntry", "Args"]

Args = dict[str, Any]


@dataclass(frozen=True)
class CorpusEntry:
    """A ``@triton.jit`` kernel of the corpus.

    - `signature`: Triton types of the runtime arguments (``{"x": "*fp32", "n": "i32"}``);
      `constexprs`: values of the ``tl.constexpr`` arguments.
    - `make_args(seed)`: the runtime arguments by name (CPU torch tensors and Python scalars), small.
    - `grid`: the launch grid, or a function of the arguments giving it.
    - `reference(args)`: the expected contents of each output argument (a PyTorch computation).
    - `outputs`: names of the arguments the kernel writes (compared against `reference`).
    - `features`: what the kernel exercises (``"mask"``, ``"dot"``, ``"scf.while"``, ...).
    - `numeric`: False when a numeric check makes no sense (e.g. debug printing only).
    """

    name: str
    fn: Any
    signature: dict[str, str]
    constexprs: dict[str, Any]
    make_args: Callable[[int], Args]
    grid: tuple[int, ...] | Callable[[Args], tuple[int, ...]]
    reference: Callable[[Args], dict[str, torch.Tensor]]
    outputs: tuple[str, ...]
    features: tuple[str, ...] = ()
    divisible_by_16: tuple[str, ...] = ()
    keep_block_pointers: bool = False
    debug: bool = False
    atol: float = 1e-4
    rtol: float = 1e-4
    numeric: bool = True
    notes: str = field(default="", compare=False)

    def grid_for(self, args: Args) -> tuple[int, ...]:
        return self.grid(args) if callable(self.grid) else self.grid

    def ttir(self) -> str:
        """This kernel's TTIR through Triton's frontend and TTIR passes: what ``fn[grid]`` compiles
        for mtia (`lowering.ttir.frontend`), except that `keep_block_pointers` keeps block pointers."""
        from lowering.ttir.frontend import ttir_from_jit

        return ttir_from_jit(
            self.fn,
            self.signature,
            self.constexprs,
            divisible_by_16=self.divisible_by_16,
            options=self.frontend_options(),
        )

    def module(self) -> Module:
        from lowering.ttir.parser import parse_ttir

        return parse_ttir(self.ttir())

    def frontend_options(self) -> Any:
        from lowering.ttir.frontend import FrontendOptions

        return FrontendOptions(rewrite_tensor_pointer=not self.keep_block_pointers, debug=self.debug)

    def launch(self, args: Args, launcher: Callable[..., Any] | None = None) -> None:
        """Run the kernel on `args` (``fn[grid](**args, **constexprs)``, or through `launcher`)."""
        grid = self.grid_for(args)
        if launcher is not None:
            launcher(self, grid, args)
            return
        self.fn[grid](**args, **self.constexprs)

    def check(self, seed: int = 0, launcher: Callable[..., Any] | None = None) -> dict[str, float]:
        """Launch on fresh inputs and compare each output with the reference; returns max abs errors.

        Raises AssertionError naming the output that differs beyond `atol`/`rtol`.
        """
        args = self.make_args(seed)
        expected = self.reference(
            {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
        )
        self.launch(args, launcher)
        errors: dict[str, float] = {}
        for name in self.outputs:
            got, want = args[name], expected[name]
            if got.dtype.is_floating_point or want.dtype.is_floating_point:
                diff = (got.double() - want.double()).abs()
                errors[name] = float(diff.max()) if diff.numel() else 0.0
                ok = torch.allclose(
                    got.double(), want.double(), atol=self.atol, rtol=self.rtol, equal_nan=True
                )
            else:
                errors[name] = float((got.long() - want.long()).abs().max()) if got.numel() else 0.0
                ok = torch.equal(got.long(), want.long())
            if not ok:
                raise AssertionError(
                    f"{self.name}: output {name!r} differs from the reference "
                    f"(max abs error {errors[name]:.3g}, atol {self.atol}, rtol {self.rtol})"
                )
        return errors
