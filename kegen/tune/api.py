"""`kegen.tune(model, ...)` for Python."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from kegen.tune.capture import TuneError
from kegen.tune.run import TuneOptions, TuneReport, tune_file


def tune(
    model: str | Path | ModuleType,
    inputs: list[Any] | None = None,
    *,
    machines: tuple[str, ...] = ("mtia-2i",),
    budget: int = 8,
    out: str | Path | None = None,
    retune: bool = False,
    **options: Any,
) -> TuneReport:
    """Tune a model in KernelBench layout (a file path, or an imported module with Model,
    get_inputs, get_init_inputs and optionally get_input_variants) and return the report; its
    `.tuned[machine]` is the tuned model (callable on the variants' inputs; other shapes fall back
    to torch.compile). `inputs` must be None or the shapes of get_inputs() (the default variant)."""
    if isinstance(model, ModuleType):
        path = getattr(model, "__file__", None)
        if path is None:
            raise TuneError("kegen.tune needs the model's source file (a module with __file__)")
        model = Path(path)
    if not isinstance(model, str | Path):
        raise TuneError(
            f"kegen.tune takes a model file or module in KernelBench layout, not {type(model).__name__}: "
            "the drafter rebuilds the model from its source"
        )
    report = tune_file(
        model,
        TuneOptions(
            machines=tuple(machines), budget=budget, out=Path(out) if out else None, retune=retune, **options
        ),
    )
    if inputs is not None:
        from kegen.tune.capture import load_model_file, shapes_of

        if shapes_of(list(inputs)) != shapes_of(load_model_file(model).variants[0]):
            raise TuneError(
                "inputs differ in shape from the model file's get_inputs(); declare other shapes "
                "in get_input_variants()"
            )
    return report
