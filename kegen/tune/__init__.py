"""kegen tune: a whole model faster on each target, verified at every input variant it serves.

    report = kegen.tune.tune_file("model.py", TuneOptions(machines=("mtia-2i",), budget=8))
    report.summary()["speedup_vs_compile"]; report.tuned["mtia-2i"](*inputs)

`kegen.tune(model, inputs, ...)` does the same for a model object (see `tune`).
"""

from __future__ import annotations

from kegen.tune.api import tune
from kegen.tune.capture import TuneError
from kegen.tune.run import TuneOptions, TuneReport, tune_file

__all__ = ["TuneError", "TuneOptions", "TuneReport", "tune", "tune_file"]


def _make_callable() -> None:
    """`kegen.tune(...)` calls `tune` (the package is also the function's home)."""
    import sys
    import types

    class _CallableModule(types.ModuleType):
        def __call__(self, *args: object, **kwargs: object) -> TuneReport:
            return tune(*args, **kwargs)  # type: ignore[arg-type]

    sys.modules[__name__].__class__ = _CallableModule


_make_callable()
