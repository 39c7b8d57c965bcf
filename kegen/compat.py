"""torch and TorchInductor version differences, in one place (Triton's are in `lowering.compat`).

kegen runs on torch 2.11-2.14. Everything that differs between those releases is handled here and
nowhere else:

- Inductor options: every option kegen sets goes through `set_inductor_options` or
  `patched_inductor_options`, which set the ones the installed torch has. A missing option with an
  emulation (`EMULATIONS`: `mtia.disable_welford_reduction`, added in 2.12, is emulated on 2.11 by
  Inductor's two-step variance) is emulated; any other missing option is dropped, named in one
  warning per process.
- Inductor's CPU benchmarker: the registry (`register_benchmarker`, >= 2.12) or
  `Benchmarker.benchmark_cpu` (2.11) — `install_cpu_benchmarker`.
- `torch.export`'s output spec: `spec_is_single`.
- Checks in Inductor's output code (`INDUCTOR_RUNTIME_CHECKS`, `LAYOUT_CHECKS`).
- Warnings torch's own internals raise on every draft (`quiet_torch_internals`).
"""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_warned: set[str] = set()  # options named in a warning already (one warning per process)


@functools.cache
def torch_version() -> tuple[int, int]:
    """(major, minor) of the installed torch, e.g. (2, 13) for 2.13.0+cpu."""
    import torch

    m = re.match(r"(\d+)\.(\d+)", str(torch.__version__))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _has_option(config: Any, key: str) -> bool:
    obj = config
    for part in key.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _two_step_variance(enabled: bool) -> bool:
    """`mtia.disable_welford_reduction` on a torch without it (2.11): Inductor's var/var_mean lower
    through `use_two_step_variance`, which answers True (a sum, then a sum of squared deviations, as
    the option gives) while `enabled`. Returns whether it was enabled before."""
    from torch._inductor import lowering

    current = lowering.use_two_step_variance
    original = getattr(current, "_kegen_original", current)
    if not enabled:
        lowering.use_two_step_variance = original
        return current is not original

    def always(*args: Any, **kwargs: Any) -> bool:
        return True

    always._kegen_original = original  # type: ignore[attr-defined]
    lowering.use_two_step_variance = always
    return current is not original


# options older releases lack, and how kegen gets their effect there: set(value) -> previous value
EMULATIONS: dict[str, Callable[[bool], bool]] = {
    "mtia.disable_welford_reduction": _two_step_variance,
}


def _split(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(options the installed torch's Inductor has, missing ones kegen emulates); any other missing
    option is dropped with a warning (once per process per option)."""
    import torch._inductor.config as config

    kept: dict[str, Any] = {}
    emulated: dict[str, Any] = {}
    for key, value in options.items():
        if _has_option(config, key):
            kept[key] = value
        elif key in EMULATIONS:
            emulated[key] = value
        elif key not in _warned:
            _warned.add(key)
            import torch

            warnings.warn(
                f"torch {torch.__version__} has no Inductor option {key!r}: left at its default "
                "(kernels it would have changed may not lower for mtia)",
                stacklevel=4,
            )
    return kept, emulated


def inductor_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The `options` the installed torch's Inductor has (missing ones: see `set_inductor_options`)."""
    return _split(options)[0]


def set_inductor_options(options: Mapping[str, Any]) -> None:
    """Set `options` on `torch._inductor.config`: an option this torch lacks is emulated where
    `EMULATIONS` has it, else dropped with one warning per process."""
    import torch._inductor.config as config

    kept, emulated = _split(options)
    for key, value in kept.items():
        setattr(config, key, value)
    for key, value in emulated.items():
        EMULATIONS[key](bool(value))


@contextlib.contextmanager
def patched_inductor_options(options: Mapping[str, Any]) -> Iterator[None]:
    """`torch._inductor.config.patch(options)`, missing options handled as `set_inductor_options`
    does (emulations are undone on exit too)."""
    import torch._inductor.config as config

    kept, emulated = _split(options)
    before = {key: EMULATIONS[key](bool(value)) for key, value in emulated.items()}
    try:
        with config.patch(kept):
            yield
    finally:
        for key, value in before.items():
            EMULATIONS[key](value)


def install_cpu_benchmarker(bench: Callable[..., float], legacy: Callable[..., float]) -> None:
    """Time Inductor's CPU autotuning choices with `bench`: through the benchmarker registry where
    torch has it (>= 2.12), else as `Benchmarker.benchmark_cpu` (`legacy`, that method's signature)."""
    from torch._inductor.runtime import benchmarking

    register = getattr(benchmarking, "register_benchmarker", None)
    if register is not None:
        register("cpu", bench, override=True)
    else:
        benchmarking.Benchmarker.benchmark_cpu = legacy  # type: ignore[method-assign]


# Inductor's output code: checks of its own runtime a standalone draft drops (2.14 groups the input
# checks in `assert_size_stride_grouped` and checks extern results with `assert_tensor_metadata`)
INDUCTOR_RUNTIME_CHECKS = frozenset(
    {"assert_size_stride", "assert_alignment", "assert_size_stride_grouped", "assert_tensor_metadata"}
)
# the checks that give one buffer's layout: call name -> (size argument, stride argument) positions
LAYOUT_CHECKS: dict[str, tuple[int, int]] = {"assert_size_stride": (1, 2), "assert_tensor_metadata": (1, 2)}


def spec_is_single(out_spec: Any, n_outputs: int) -> bool:
    """Whether an exported program's output spec is one tensor (not a tuple/list of them)."""
    if out_spec is not None and hasattr(out_spec, "num_children"):
        return bool(out_spec.num_children == 0)
    return n_outputs == 1


# (category, message regex) of warnings torch's internals raise about torch's own code on every draft
# (nothing a kegen user can act on); ignored where kegen calls into torch (`quiet_torch_internals`)
TORCH_INTERNAL_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    # torch.export deep-copies its pytree specs (2.11)
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
)


@contextlib.contextmanager
def quiet_torch_internals() -> Iterator[None]:
    """Ignore `TORCH_INTERNAL_WARNINGS` inside the block (other warnings are shown as usual)."""
    with warnings.catch_warnings():
        for category, message in TORCH_INTERNAL_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield
