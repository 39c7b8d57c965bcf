"""TorchInductor on the simulated MTIA: torch.compile routing, Inductor drafts and the compile baseline.

- `kegen.inductor.compile(model, machine=...)` / `enable()`: torch.compile onto mtia_sim (routing).
- `kegen.inductor.draft`: Inductor's output → a standalone, readable KernelBench candidate.
- `kegen.inductor.baseline.compile_baseline`: simulated time of torch.compile on mtia for a problem.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CompiledModel", "CompiledRun", "compile", "enable"]


def __getattr__(name: str) -> Any:  # lazy: Triton imports kegen.inductor.backend through its entry point
    if name in __all__:
        from kegen.inductor import routing

        return getattr(routing, name)
    raise AttributeError(name)
