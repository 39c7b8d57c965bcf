"""The model file `kegen tune` reads (KernelBench layout + optional get_input_variants), the check
that torch.compile captures it whole, and one static problem file per input variant."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class TuneError(ValueError):
    """Bad input for `kegen tune` (the message says what and where); `kind` is the report's status."""

    def __init__(self, message: str, kind: str = "bad_input") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ModelFile:
    """A loaded model file: its module and the input lists it serves (default first)."""

    path: Path
    module: Any
    variants: list[list[Any]]

    def build(self, seed: int = 0) -> Any:
        import torch

        torch.manual_seed(seed)
        return self.module.Model(*self.module.get_init_inputs()).eval()


def load_model_file(path: str | Path) -> ModelFile:
    """Import a model file; TuneError when it is missing or lacks Model/get_inputs/get_init_inputs."""
    path = Path(path)
    if not path.is_file():
        raise TuneError(f"model file {path} does not exist")
    name = f"_kegen_tune_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TuneError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise TuneError(f"importing {path} failed: {type(exc).__name__}: {exc}") from exc
    missing = [a for a in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, a)]
    if missing:
        raise TuneError(
            f"{path} has no {', '.join(missing)} (KernelBench layout: Model, get_inputs, get_init_inputs)"
        )
    import torch

    torch.manual_seed(0)
    variants = [list(module.get_inputs())]
    if hasattr(module, "get_input_variants"):
        extra = module.get_input_variants()
        if not isinstance(extra, list | tuple) or not all(isinstance(v, list | tuple) for v in extra):
            raise TuneError(f"{path}: get_input_variants() must return a list of input lists")
        variants += [list(v) for v in extra]
    _check_fixed_shapes(path, module, variants)
    return ModelFile(path, module, variants)


def _check_fixed_shapes(path: Path, module: Any, variants: list[list[Any]], draws: int = 2) -> None:
    """TuneError when get_inputs() or get_input_variants() give other shapes on another call (sizes that
    depend on the random values, e.g. bags of random lengths): every variant is drafted for its shapes."""
    import torch

    for draw in range(1, draws + 1):
        torch.manual_seed(draw)
        again = [list(module.get_inputs())]
        if hasattr(module, "get_input_variants"):
            again += [list(v) for v in module.get_input_variants()]
        for k, (first, other) in enumerate(zip(variants, again, strict=False)):
            a, b = shapes_of(first), shapes_of(other)
            if a == b:
                continue
            where = "get_inputs()" if k == 0 else f"get_input_variants()[{k - 1}]"
            i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            got = (a[i] if i < len(a) else "nothing", b[i] if i < len(b) else "nothing")
            raise TuneError(
                f"{path.name}: {where} gives inputs of other shapes from call to call (input {i}: {got[0]} "
                f"then {got[1]}); kegen tune drafts each variant's kernels for its shapes, so sizes must not "
                "depend on the random values: fix them per call (e.g. bags of a fixed length, or padded) and "
                "list each size the model serves in get_input_variants()"
            )


def shapes_of(inputs: list[Any]) -> list[Any]:
    """Shapes (and dtypes) of an input list, as JSON-able data."""
    import torch

    return [
        [list(x.shape), str(x.dtype).removeprefix("torch.")] if isinstance(x, torch.Tensor) else repr(x)
        for x in inputs
    ]


def check_capturable(mf: ModelFile) -> None:
    """Raise TuneError(kind="graph_break") naming the first graph break and its line when
    torch.compile cannot capture the model's forward in one graph."""
    import torch

    model = mf.build()
    torch._dynamo.reset()
    with torch.no_grad():
        try:
            explained = torch._dynamo.explain(model)(*mf.variants[0])
        except Exception as exc:
            raise TuneError(
                f"torch.compile cannot trace {mf.path}: {type(exc).__name__}: {exc}", "graph_break"
            ) from exc
    torch._dynamo.reset()
    if explained.graph_break_count == 0:
        return
    reason = explained.break_reasons[0]
    where = ""
    for frame in reversed(list(getattr(reason, "user_stack", []) or [])):
        where = f" at {frame.filename}:{frame.lineno} ({(frame.line or '').strip()})"
        break
    first = str(reason.reason).strip().splitlines()[0] if str(reason.reason).strip() else "graph break"
    raise TuneError(f"torch.compile breaks the graph of {mf.path.name}{where}: {first}", "graph_break")


VARIANT_FOOTER = """

# --- kegen tune: this problem serves input variant {k} of {name} ---
def get_inputs():
    {body}
"""


def write_variant_problems(mf: ModelFile, out_dir: Path) -> list[Path]:
    """One standalone problem file per variant (the model's source, get_inputs returning that
    variant's shapes from the model's own generators: fresh random values on every call)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    source = mf.path.read_text()
    paths = []
    for k in range(len(mf.variants)):
        body = "return _kegen_default_inputs()" if k == 0 else f"return list(get_input_variants()[{k - 1}])"
        text = source + VARIANT_FOOTER.format(k=k, name=mf.path.name, body=body)
        if k == 0:
            text = text.replace("\ndef get_inputs(", "\ndef _kegen_default_inputs(", 1)
        p = out_dir / f"variant{k}.py"
        p.write_text(text)
        paths.append(p)
    return paths


def draft(problem: Path, fused: bool = True) -> str:
    """Inductor's draft of a problem (a KernelBench candidate whose kernels are Inductor's; every
    op on the device). `fused=False` turns Inductor's fusion off: one kernel per op, the way eager
    dispatch runs the model (the eager time on mtia)."""
    from kegen.inductor import capture as inductor_capture
    from kegen.inductor.capture import CaptureError
    from kegen.inductor.draft import draft_from_inductor

    saved = dict(inductor_capture.DRAFT_CONFIG)
    if not fused:
        inductor_capture.DRAFT_CONFIG["max_fusion_size"] = 1
    try:
        source, _ = draft_from_inductor(problem)
    except CaptureError as exc:
        raise TuneError(f"Inductor cannot draft {problem.name}: {exc}", "capture") from exc
    finally:
        inductor_capture.DRAFT_CONFIG.clear()
        inductor_capture.DRAFT_CONFIG.update(saved)
    return source
