"""The executor interface: run `fn(*args)` somewhere, get a `concurrent.futures.Future` back.

The unit of work is a module-level function with plain-data arguments and a plain-data result
(an evaluation: the search's `kegen.search.fitness.evaluate_task`, the bench's
`kegen.executor.tasks.evaluate_result_task`). Executors never touch the graph store; the driver
records results as futures complete. A task whose worker or node was lost is retried; when retries
run out its future raises `InfrastructureError`, which callers record as an
infrastructure failure, never as a wrong candidate.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

EXECUTORS = ("local", "ray")
INFRA_STATUS = "infra_error"


class InfrastructureError(RuntimeError):
    """The task could not run to completion for reasons outside it (a worker or node was lost)."""


@dataclass(frozen=True)
class ExecutorSpec:
    """Which executor runs evaluations and how wide.

    kind: "local" (worker processes on this machine; `jobs` 0 = in the calling process) or "ray".
    jobs: local: worker processes. ray: evaluations in flight at once (<= 1: the cluster's capacity
    for the target's resource). target: "mtia"/"cpu" tasks ask Ray for a CPU, "nvidia"/"amd" for a GPU.
    """

    kind: str = "local"
    jobs: int = 1
    ray_address: str | None = None
    target: str = "mtia"
    max_retries: int = 2

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ValueError(f"unknown executor {self.kind!r}; choose one of {', '.join(EXECUTORS)}")
        if self.jobs < 0:
            raise ValueError(f"--jobs must be >= 0, got {self.jobs}")
        if self.ray_address and self.kind != "ray":
            raise ValueError("--ray-address needs --executor ray")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")


class EvalExecutor(ABC):
    """Runs tasks; `slots` is how many the caller should keep in flight."""

    slots: int = 1
    name: str = "executor"

    @abstractmethod
    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        """Start `fn(*args)`; its future holds the result, the task's own exception, or
        `InfrastructureError` when the task was lost more often than retries allow."""

    @abstractmethod
    def shutdown(self, cancel: bool = True) -> None:
        """Stop the workers (queued tasks are cancelled if `cancel`); safe to call twice."""

    def __enter__(self) -> EvalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class InlineExecutor(EvalExecutor):
    """Runs each task in the calling process at submit time (`--jobs 0`, tests)."""

    name = "inline"

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        try:
            fut.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
            fut.set_exception(exc)
        return fut

    def shutdown(self, cancel: bool = True) -> None:
        return None
