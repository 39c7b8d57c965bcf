"""kegen.eval: check a candidate kernel against its PyTorch reference, time it, profile it.

    from kegen.eval import evaluate, EvalConfig, EvalResult, Status
    result = evaluate("problem.py", candidate_source_or_path, config=EvalConfig(target="mtia"))
    result.status, result.fitness, result.speedups, result.profile

The candidate runs in a separate sandboxed process (time and memory limits, no network); every
failure becomes a `Status`, never an exception. A broken *problem* file raises `ProblemError`.
"""

from kegen.eval.api import evaluate
from kegen.eval.config import EvalConfig
from kegen.eval.errors import ProblemError
from kegen.eval.result import EvalResult, Status

__all__ = ["EvalConfig", "EvalResult", "ProblemError", "Status", "evaluate"]
