"""Screening: what a candidate need not be simulated for (docs/DECISIONS.md D18).

Before a candidate is simulated, the task that would evaluate it first *probes* it
(`kegen.search.screening_probe`: compiled and called once in the evaluator's sandbox, every launch
recorded, nothing simulated) and then:

- **duplicate**: its artifact key (digest of the ELF images, grids, launch options, argument slots
  and storages of every launch, and of the outputs) equals that of a node already evaluated: it
  gets that node's result, recorded as `duplicate_of` N; not simulated;
- **rejected**: it does not compile (a local-store overflow, an op the lowering does not support,
  a syntax error): recorded as `compile_error` with the lowering's own message; not simulated;
- **hopeless**: its static lower bound (`lower_bound`) is above `hopeless_factor` x the best time
  so far: recorded as `skipped` with the estimate; not simulated;
- otherwise it is **simulated** (evaluated as usual; the probe's compile is reused from the cache).

Screened candidates cost no evaluation of the budget (`charged` is False) up to a cap of
`free_per_evaluation` x the budget + 8, after which they are charged so a search always ends. The
shipped best is always a simulated node: a duplicate copies N's fitness exactly and the store
breaks ties by the earliest node, which is N.
"""

from __future__ import annotations

import secrets
import threading
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

DEFAULT_EVALUATOR = "kegen.search.fitness:evaluate_candidate"
SCREENED = ("duplicate", "rejected", "hopeless")
SKIPPED_STATUS = "skipped"


@dataclass(frozen=True)
class ScreeningConfig:
    """enabled: probe candidates before simulating them (mtia target, default evaluator only).
    hopeless_factor: skip when the lower bound exceeds this x the best time (1.0: only candidates
    that cannot beat the best). bound_slack: the kernel part of the bound is multiplied by this
    (the evaluator's own roofline slack, 0.9). probe_timeout_s: wall-clock limit of one probe."""

    enabled: bool = True
    hopeless_factor: float = 1.0
    bound_slack: float = 0.9
    probe_timeout_s: float = 120.0
    free_per_evaluation: float = 2.0


@dataclass
class ScreeningCounts:
    """How many candidates each screening outcome took (and the probes' wall time)."""

    simulated: int = 0
    duplicates: int = 0
    rejected: int = 0
    hopeless: int = 0
    probe_failed: int = 0
    probe_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LowerBound:
    """A lower bound on a candidate's simulated time from its launches and the problem's roofline.

    Every term is a physical limit of the simulated chip: each launch pays the launch overhead;
    the problem's FLOPs cannot run faster than the DPE peak of the PEs the widest launch occupies
    (a launch of p programs occupies at most min(p, PEs) PEs); its minimum bytes cannot move faster
    than DRAM (SRAM when a launch keeps tensors resident). The kernel part is scaled by `slack`.
    """

    seconds: float
    launch_s: float
    compute_s: float
    memory_s: float
    pes_used: int
    num_pes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def lower_bound(launches: list[Any], roofline: dict[str, float], machine: str, slack: float) -> LowerBound:
    """The bound for a probe's `launches` (LaunchSummary) and problem `roofline` figures."""
    from mtia_sim.machine import load_machine

    m = load_machine(machine)
    pes = int(m.num_pes)
    used = max((min(x.programs, pes) for x in launches), default=pes)
    compute = float(roofline.get("compute_time_s", 0.0)) * pes / max(used, 1)
    memory = float(roofline.get("memory_time_s", 0.0))
    if any(x.sram_mode == "resident" for x in launches):
        memory *= float(m.dram_bw) / max(float(m.dram_bw), float(m.sram_bw))
    launch = len(launches) * float(m.launch_overhead_ns) * 1e-9
    return LowerBound(launch + slack * max(compute, memory), launch, compute, memory, used, pes)


@dataclass(frozen=True)
class ScreenRequest:
    """What a screening task gets from the driver (plain data: it may run on another machine)."""

    config: ScreeningConfig
    known_keys: frozenset[str]
    best_time_s: float | None
    salt: bytes = b""  # the search's secret for the probe's storage contents


def screened_task(request: ScreenRequest, fn: Any, *args: Any) -> dict[str, Any]:
    """Probe, then either answer without simulating or run `fn(*args)` (`evaluate_task`'s args:
    the evaluator and its `EvalRequest`)."""
    import tempfile

    from kegen.search.screening_probe import probe

    eval_request = args[1]
    code = eval_request.code
    with tempfile.TemporaryDirectory(prefix="kegen-screen-") as tmp:
        problem = Path(eval_request.problem.materialize(Path(tmp)))
        machine = eval_request.machine_here(Path(tmp))
        pr = probe(problem, code, machine, request.config.probe_timeout_s, request.salt)
        # the machine file may be a copy in tmp: read the bound's figures while it is there
        bound = None
        if pr.status == "ok" and pr.key is not None and pr.key not in request.known_keys:
            bound = lower_bound(pr.launches, pr.roofline, machine, request.config.bound_slack)
    info: dict[str, Any] = {"probe_s": round(pr.duration_s, 3)}
    if pr.status == "compile_error":
        return _screened("compile_error", pr.message, "rejected", info, source_line=pr.source_line)
    if pr.status != "ok" or pr.key is None:
        info["probe"] = pr.message
        return _simulate(fn, args, info, "probe_failed")
    info["artifact_key"] = pr.key
    if pr.key in request.known_keys:
        return _screened(SKIPPED_STATUS, "same compiled kernels as an evaluated node", "duplicate", info)
    assert bound is not None  # computed above for a probe that compiled to new kernels
    info["lower_bound"] = bound.to_dict()
    best = request.best_time_s
    if best and bound.seconds > request.config.hopeless_factor * best:
        why = (
            f"static lower bound {bound.seconds * 1e6:.2f} us (launches {bound.launch_s * 1e6:.2f} us, "
            f"compute on {bound.pes_used}/{bound.num_pes} PEs {bound.compute_s * 1e6:.2f} us, memory "
            f"{bound.memory_s * 1e6:.2f} us) > {request.config.hopeless_factor:g} x the best time "
            f"{best * 1e6:.2f} us: cannot beat it, not simulated"
        )
        return _screened(SKIPPED_STATUS, why, "hopeless", info)
    return _simulate(fn, args, info, "simulated")


def _screened(status: str, message: str, screen: str, info: dict[str, Any], **extra: Any) -> dict[str, Any]:
    metrics = {"screen": screen, **info, **{k: v for k, v in extra.items() if v is not None}}
    return {"status": status, "message": message, "fitness": 0.0, "metrics": metrics, "duration_s": 0.0}


def _simulate(fn: Any, args: tuple[Any, ...], info: dict[str, Any], screen: str) -> dict[str, Any]:
    out: dict[str, Any] = fn(*args)
    out.setdefault("metrics", {}).update(screen=screen, **info)
    return out


class Screening:
    """The driver's side: submits screened tasks, resolves duplicates, counts, keeps the key index."""

    def __init__(self, config: ScreeningConfig, *, target: str, evaluator: str, budget: int | None) -> None:
        self.config = config
        self.active = config.enabled and target == "mtia" and evaluator == DEFAULT_EVALUATOR
        self.counts = ScreeningCounts()
        self.free_cap = int(config.free_per_evaluation * (budget or 0)) + 8
        self.index: dict[str, tuple[int, dict[str, Any]]] = {}  # artifact key -> (node, outcome)
        self.best_time_s: float | None = None
        self.salt = secrets.token_bytes(16)
        self.task: Any = screened_task  # what runs on the executor (tests substitute their own)
        self._lock = threading.Lock()

    def submit(self, executor: Any, node_id: int, fn: Any, *args: Any) -> Future[Any]:
        """Submit `fn(*args)` (screened when active); the future holds the outcome dict to record."""
        if not self.active:
            inner = executor.submit(fn, *args)
        else:
            with self._lock:
                request = ScreenRequest(self.config, frozenset(self.index), self.best_time_s, self.salt)
            inner = executor.submit(self.task, request, fn, *args)
        outer: Future[Any] = Future()

        def resolve(f: Future[Any]) -> None:
            try:
                outer.set_result(self._account(node_id, f.result()))
            except BaseException as exc:  # noqa: BLE001 - handed on through the future
                outer.set_exception(exc)

        inner.add_done_callback(resolve)
        return outer

    def _account(self, node_id: int, out: dict[str, Any]) -> dict[str, Any]:
        metrics = out.get("metrics") or {}
        screen = metrics.get("screen", "simulated")
        with self._lock:
            self.counts.probe_s += float(metrics.get("probe_s") or 0.0)
            if screen == "duplicate":
                self.counts.duplicates += 1
                return self._copy_of(metrics)
            if screen == "rejected":
                self.counts.rejected += 1
            elif screen == "hopeless":
                self.counts.hopeless += 1
            else:
                self.counts.simulated += 1
                self.counts.probe_failed += screen == "probe_failed"
                self._learn(node_id, out, metrics)
            if screen in SCREENED and self._free_used() > self.free_cap:
                metrics["charged"] = True
            return out

    def _copy_of(self, metrics: dict[str, Any]) -> dict[str, Any]:
        node, orig = self.index[str(metrics.get("artifact_key"))]
        out = {k: v for k, v in orig.items() if k not in ("metrics", "duration_s", "message")}
        out["message"] = f"same compiled kernels as node {node} (screened: not simulated)"
        out["metrics"] = {**metrics, "duplicate_of": node}
        out["duration_s"] = 0.0
        if self._free_used() > self.free_cap:
            out["metrics"]["charged"] = True
        return out

    def _learn(self, node_id: int, out: dict[str, Any], metrics: dict[str, Any]) -> None:
        key = metrics.get("artifact_key")
        if key and out.get("status") in ("ok", "incorrect", "cheat_detected"):
            self.index.setdefault(key, (node_id, out))
        t = out.get("candidate_time_s")
        if out.get("status") == "ok" and t:
            self.best_time_s = t if self.best_time_s is None else min(self.best_time_s, t)

    def _free_used(self) -> int:
        return self.counts.duplicates + self.counts.rejected + self.counts.hopeless

    @staticmethod
    def charged(out: Any) -> bool:
        """Whether an outcome counts against the evaluation budget (screened ones do not, up to the cap)."""
        metrics = getattr(out, "metrics", None) or {}
        return metrics.get("screen") not in SCREENED or bool(metrics.get("charged"))

    def summary(self, store: Any, run_id: str) -> dict[str, Any]:
        """Screening counts and evaluations-to-90%-of-final-best, for SearchResult and run.json."""
        return {"screening": self.counts.to_dict(), "evals_to_90": evals_to_fraction(store, run_id, 0.9)}


def evals_to_fraction(store: Any, run_id: str, fraction: float) -> int | None:
    """Simulated evaluations (the seed's is 0) until one reached `fraction` x the run's final best
    fitness; None when nothing was correct."""
    nodes = sorted(
        (n for n in store.nodes(run_id) if n.evaluated), key=lambda n: (n.evaluated_at or 0.0, n.id)
    )
    best = max((n.fitness for n in nodes if n.correct), default=0.0)
    if best <= 0:
        return None
    count = 0
    for n in nodes:
        ev = store.evaluation(n.id)
        simulated = Screening.charged(ev) if ev is not None else True
        if n.parent_id is not None and simulated and "duplicate_of" not in (ev.metrics if ev else {}):
            count += 1
        if n.correct and n.fitness >= fraction * best:
            return count
    return count


def screening_line(summary: dict[str, Any]) -> str:
    """One line for `kegen evolve`: what screening spared and evaluations to 90% of the best."""
    c = summary.get("screening") or {}
    e90 = summary.get("evals_to_90")
    return (
        f"screening: {c.get('simulated', 0)} simulated, {c.get('duplicates', 0)} duplicates, "
        f"{c.get('rejected', 0)} rejected at compile, {c.get('hopeless', 0)} hopeless (not simulated; "
        f"probes {c.get('probe_s', 0.0):.0f} s); evaluations to 90% of the best: "
        f"{'-' if e90 is None else e90}"
    )
