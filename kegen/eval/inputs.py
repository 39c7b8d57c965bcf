"""Fresh, seeded inputs for a problem, on a device, at the problem's sizes or at edge sizes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from kegen.eval.loader import Problem

MAX_AUTO_EDGES = 1


class InputFactory:
    """Makes a new list of inputs per call: `torch.manual_seed(seed)` then `get_inputs()`.

    Two calls with the same seed give equal values in distinct tensors, so the reference and the
    candidate never share an input buffer.
    """

    def __init__(self, problem: Problem, device: str) -> None:
        self.problem = problem
        self.device = device

    def make(self, seed: int, sizes: dict[str, int] | None = None) -> list[Any]:
        """`get_inputs()` seeded; on a GPU made there (`default_device`: no host generation and
        copy), or on the host if the problem's code cannot run on the GPU."""
        with _patched_sizes(self.problem, sizes or {}):
            torch.manual_seed(seed)
            if self.device != "cpu":
                try:
                    with default_device(self.device):
                        raw = self.problem.get_inputs()
                    return [to_device(x, self.device) for x in raw]
                except Exception:  # e.g. get_inputs() goes through numpy: make them on the host
                    torch.manual_seed(seed)
            raw = self.problem.get_inputs()
        return [to_device(x, self.device) for x in raw]

    def init_inputs(self) -> list[Any]:
        return [to_device(x, self.device) for x in self.problem.get_init_inputs()]

    def edge_sizes(self) -> list[dict[str, int]]:
        """Size overrides to try besides the problem's own: EDGE_SIZES, else one automatic set.

        The automatic set changes each size constant that only get_inputs() depends on (not
        get_init_inputs()) to an odd, non-power-of-two value below it; the caller skips a set on
        which the reference itself fails (the problem does not allow it).
        """
        if self.problem.edge_sizes:
            return [dict(e) for e in self.problem.edge_sizes]
        base = _init_fingerprint(self.problem, {})
        auto: dict[str, int] = {}
        for name, value in self.problem.size_constants.items():
            if value < 4 or name.isupper() and name.startswith("BLOCK"):
                continue
            if _init_fingerprint(self.problem, {name: value + 1}) != base:
                continue
            auto[name] = max(3, value // 2 + 1) if value > 8 else value - 1
        return [auto][:MAX_AUTO_EDGES] if auto else []


def default_device(device: str) -> contextlib.AbstractContextManager[Any]:
    """Tensors created without a device land on `device`: problems and candidates written for host
    tensors (the mtia convention, `torch.empty(n)`) run unchanged on a GPU."""
    return torch.device(device) if device != "cpu" else contextlib.nullcontext()


def to_device(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    return x


def _init_fingerprint(problem: Problem, sizes: dict[str, int]) -> str:
    try:
        with _patched_sizes(problem, sizes):
            torch.manual_seed(0)
            return repr(
                [tuple(x.shape) if isinstance(x, torch.Tensor) else x for x in problem.get_init_inputs()]
            )
    except Exception as exc:  # an init that breaks under new sizes depends on them
        return f"error {exc}"


@contextmanager
def _patched_sizes(problem: Problem, sizes: dict[str, int]) -> Iterator[None]:
    globs = vars(problem.module)
    saved = {k: globs[k] for k in sizes if k in globs}
    unknown = [k for k in sizes if k not in globs]
    if unknown:
        raise KeyError(f"EDGE_SIZES names {unknown}, which the problem does not define")
    globs.update(sizes)
    try:
        yield
    finally:
        globs.update(saved)


def clone_all(values: list[Any]) -> list[Any]:
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]


def flatten_outputs(out: Any) -> list[torch.Tensor]:
    """A forward's result as a list of tensors (tuples/lists flattened; scalars become tensors)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, list | tuple):
        flat: list[torch.Tensor] = []
        for item in out:
            flat.extend(flatten_outputs(item))
        return flat
    if isinstance(out, int | float | bool):
        return [torch.tensor(out)]
    raise TypeError(f"forward returned {type(out).__name__}; expected a tensor or a tuple of tensors")
