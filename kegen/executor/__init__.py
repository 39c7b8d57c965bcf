"""Where evaluations run: local worker processes (`--executor local --jobs N`) or Ray
(`--executor ray [--ray-address ADDR]`).

    from kegen.executor import ExecutorSpec, make_executor
    with make_executor(ExecutorSpec("local", jobs=4)) as ex:
        fut = ex.submit(fn, *args)     # fn: module-level, plain-data arguments and result

Workers never write the graph store; lost workers are retried, then reported as
`InfrastructureError`. Local workers die with their driver (see `kegen.executor.lifetime`).
"""

from __future__ import annotations

from kegen.executor.base import (
    EXECUTORS,
    INFRA_STATUS,
    EvalExecutor,
    ExecutorSpec,
    InfrastructureError,
    InlineExecutor,
)
from kegen.executor.tasks import FileRef, evaluate_result_task


def make_executor(spec: ExecutorSpec) -> EvalExecutor:
    """The executor `spec` names (Ray is imported only when asked for)."""
    if spec.kind == "ray":
        from kegen.executor.ray_exec import RayExecutor

        return RayExecutor(spec)
    if spec.jobs == 0:
        return InlineExecutor()
    from kegen.executor.local import LocalProcessExecutor

    return LocalProcessExecutor(spec.jobs, max_retries=spec.max_retries)


__all__ = [
    "EXECUTORS",
    "INFRA_STATUS",
    "EvalExecutor",
    "ExecutorSpec",
    "FileRef",
    "InfrastructureError",
    "InlineExecutor",
    "evaluate_result_task",
    "make_executor",
]
