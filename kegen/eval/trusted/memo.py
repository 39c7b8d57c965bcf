"""The evaluator's memo of problem-level measurements, across the evaluations of one process.

A search evaluates many candidates of one problem in the same evaluator process (`--jobs 0`, or a
local executor worker that lives as long as the search). What does not depend on the candidate —
the eager and torch.compile times of the reference, the seed's time as a baseline candidate, the
roofline — is measured by the first evaluation and reused by the next ones, under a key of
everything it depends on (`problem_key`). The memo lives in the trusted evaluator's memory only,
never on disk: no candidate (sandboxed or not) can write to it, and nothing stale survives an
upgrade of kegen, torch or Triton. Results say what was reused (`details.memo`).

The memo also keeps the best candidate time seen per problem, which `gpu_profile="auto"` uses to
run ncu only on candidates that improve (`kegen.eval.trusted.profile_gpu.want_ncu`).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from kegen.eval.trusted.evaluator import Evaluator

MAX_ENTRIES = 512
_memo: OrderedDict[str, Any] = OrderedDict()
_best: dict[str, float] = {}


def value_signature(values: list[Any]) -> list[Any]:
    """Shapes and dtypes of tensors (other values as their repr, capped): what the key needs of inputs."""
    sig: list[Any] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            sig.append([list(v.shape), str(v.dtype).removeprefix("torch.")])
        else:
            sig.append(repr(v)[:200])
    return sig


def input_fingerprint(values: list[Any]) -> list[Any]:
    """What a data-dependent measurement (a roofline) needs of one draw of inputs: the shapes and
    dtypes of every tensor, and the contents of the integer ones (indices, offsets and lengths decide
    how many rows a jagged or gathering op moves); floating-point contents are left out."""
    out: list[Any] = value_signature(values)
    for v in values:
        if isinstance(v, torch.Tensor) and not v.is_floating_point() and not v.is_complex():
            data = v.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
            out.append(hashlib.sha256(data.numpy().tobytes()).hexdigest())
    return out


def environment() -> dict[str, str]:
    """The software and device a measurement was taken with."""
    env: dict[str, str] = {"torch": str(torch.__version__)}
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:  # the cpu target does not need Triton's version to match
        env["triton"] = "none"
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
        env["cuda"] = str(torch.version.cuda or torch.version.hip or "")
    return env


def module_constants(module: Any) -> dict[str, Any]:
    """The problem module's scalar globals (sizes such as M, N, K, and whatever they were computed
    from: a size read from the environment changes them while the file's text stays the same)."""
    consts: dict[str, Any] = {}
    for name, v in sorted(vars(module).items()) if module is not None else ():
        if not name.startswith("__") and type(v) in (int, float, bool, str):
            consts[name] = v if not isinstance(v, str) else v[:200]
    return consts


def problem_key(
    ev: Evaluator, what: str, init: list[Any] | None = None, module: Any = None, **parts: Any
) -> str:
    """Key of a problem-level measurement `what`: the problem's SHA-256 and module constants (with
    the text they fix the shapes and dtypes of `get_inputs`, whose draws may vary: jagged lengths),
    the init inputs' shapes and dtypes, the target, machine and device, torch/Triton versions, the
    knobs that change a measurement, and `parts`."""
    cfg = ev.cfg
    data = {
        "what": what,
        "problem": ev.result["details"].get("problem_sha256"),
        "constants": module_constants(module),
        "init": value_signature(init or []),
        "target": cfg.target,
        "machine": cfg.machine if cfg.target == "mtia" else "",
        "env": environment(),
        "timing": [cfg.timing_runs, cfg.warmup_ms, cfg.rep_ms],
        **parts,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def get(key: str) -> Any:
    """The memoised value of `key`, or None."""
    if key not in _memo:
        return None
    _memo.move_to_end(key)
    return _memo[key]


def put(key: str, value: Any) -> None:
    """Remember `value` (least recently used entries go beyond MAX_ENTRIES)."""
    _memo[key] = value
    _memo.move_to_end(key)
    while len(_memo) > MAX_ENTRIES:
        _memo.popitem(last=False)


def note(ev: Evaluator, what: str) -> None:
    """Record in the result that `what` was reused from an earlier evaluation."""
    reused = ev.result["details"].setdefault("memo", [])
    if what not in reused:
        reused.append(what)


def best_time(key: str) -> float | None:
    """The fastest correct candidate time recorded under `key` so far."""
    return _best.get(key)


def record_time(key: str, seconds: float) -> None:
    if seconds > 0 and (key not in _best or seconds < _best[key]):
        _best[key] = seconds


def reset_best() -> None:
    """Forget the best times (a new search starts its own "best so far")."""
    _best.clear()


def clear() -> None:
    """Forget everything (tests; a long-lived process evaluating a changed machine)."""
    _memo.clear()
    _best.clear()
