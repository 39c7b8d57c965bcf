"""Ray (`--executor ray [--ray-address ADDR]`, extra `kegen[ray]`): each evaluation is a Ray task.

Tasks ask for one CPU (`mtia`, `cpu` targets) or one GPU (`nvidia`, `amd`). Ray re-runs a task
whose worker process or node died (`max_retries`); when that runs out, or the cluster cannot run
the task at all, its future raises `InfrastructureError`. An exception raised by the task itself
is passed through unchanged. Results come back as plain data; the driver alone writes the store.
Ray kills a job's workers when its driver exits, so a killed `kegen evolve` leaves no tasks running.
The driver's KEGEN_* settings travel with the tasks (`forwarded_env`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from kegen.executor.base import EvalExecutor, ExecutorSpec, InfrastructureError
from kegen.targets import GPU_TARGETS


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """What runs on the Ray worker."""
    return fn(*args)


def forwarded_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's kegen settings (KEGEN_* variables) that tasks see on the workers; credentials
    (names with KEY, TOKEN, SECRET or PASSWORD) stay on the driver, which alone calls the LLM."""
    env = os.environ if environ is None else environ
    secret = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    return {k: v for k, v in env.items() if k.startswith("KEGEN_") and not any(s in k for s in secret)}


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError(
            f"--executor ray needs Ray, which is not installed here ({exc}); install it with "
            "pip install 'kegen[ray]' (and the same kegen on every node of the cluster)"
        ) from exc
    return ray


class RayExecutor(EvalExecutor):
    """Evaluations as Ray tasks on the cluster at `spec.ray_address` (else `$RAY_ADDRESS`, else a
    Ray started for this process on this machine)."""

    name = "ray"

    def __init__(self, spec: ExecutorSpec) -> None:
        ray = self._ray = _import_ray()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self._owns = not ray.is_initialized()
        if self._owns:
            address = spec.ray_address or os.environ.get("RAY_ADDRESS") or None
            kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
            if address is None:  # a private single-node Ray on this machine
                kwargs.update(include_dashboard=False, num_cpus=spec.jobs if spec.jobs > 1 else None)
            try:
                ray.init(address=address, **kwargs)
            except ConnectionError as exc:
                raise RuntimeError(f"cannot reach the Ray cluster at {address}: {exc}; start one with "
                                   "`ray start --head` or fix --ray-address") from exc
        gpu = spec.target in GPU_TARGETS
        resource = "GPU" if gpu else "CPU"
        capacity = int(ray.cluster_resources().get(resource, 0))
        self._refs: dict[Any, Future[Any]] = {}
        self._lock = threading.Lock()
        if capacity < 1:
            self.shutdown()
            raise RuntimeError(
                f"the Ray cluster has no {resource}; --target {spec.target} evaluations need one "
                f"(add nodes with `ray start --address ... --num-{resource.lower()}s N`)"
            )
        self.slots = spec.jobs if spec.jobs > 1 else capacity
        self._remote = ray.remote(_call).options(
            num_cpus=1,
            num_gpus=1 if gpu else 0,
            max_retries=spec.max_retries,
            retry_exceptions=False,
            runtime_env={"env_vars": forwarded_env()},
        )

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        ref = self._remote.remote(fn, args)
        out: Future[Any] = Future()
        out.set_running_or_notify_cancel()
        with self._lock:
            self._refs[ref] = out
        ref.future().add_done_callback(lambda f, ref=ref: self._settle(ref, f))
        return out

    def _settle(self, ref: Any, inner: Future[Any]) -> None:
        with self._lock:
            out = self._refs.pop(ref, None)
        if out is None or out.done():
            return
        cancelled = InfrastructureError("the Ray task was cancelled")
        exc = cancelled if inner.cancelled() else inner.exception()
        if exc is None:
            out.set_result(inner.result())
            return
        errors = self._ray.exceptions
        if isinstance(exc, errors.RayTaskError):  # the task itself raised: pass its exception on
            cause = exc.as_instanceof_cause()
            out.set_exception(cause if isinstance(cause, BaseException) else exc)
        else:  # worker/node/object lost, unschedulable, cancelled: not the candidate's doing
            out.set_exception(InfrastructureError(f"Ray lost the task ({type(exc).__name__}: {exc})"))

    def shutdown(self, cancel: bool = True) -> None:
        with self._lock:
            refs = list(self._refs)
        if cancel:
            for ref in refs:
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:  # already finished or its worker is gone
                    pass
        for ref in refs:
            with self._lock:
                fut = self._refs.pop(ref, None)
            if fut is not None and not fut.done():
                fut.set_exception(InfrastructureError("the executor was shut down during this task"))
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns = False
