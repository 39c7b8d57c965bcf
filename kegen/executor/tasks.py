"""The bench's task: one `kegen.eval` evaluation of a typed `EvalRequest` (files carried as text:
`kegen.eval.request.FileRef`, re-exported here).

The search's task (`kegen.search.fitness.evaluate_task`) is handed to executors like any other
callable; the executor imports nothing of the search.
"""

from __future__ import annotations

from typing import Any

from kegen.eval.request import EvalRequest, FileRef

__all__ = ["EvalRequest", "FileRef", "evaluate_result_task"]


def evaluate_result_task(request: EvalRequest) -> dict[str, Any]:
    """`kegen.eval` of `request` on whatever machine runs this; returns `EvalResult.to_dict()`."""
    return request.evaluate().to_dict()
