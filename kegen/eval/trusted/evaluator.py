"""The trusted evaluator E: the whole evaluation flow, in a process where no candidate code runs.

E loads the problem from a private, content-hashed copy, draws an unpredictable seed (`secrets`)
for the model's construction and for every call, builds the inputs and runs the reference itself,
sends the inputs to the candidate's sandboxed worker as plain bytes and gets the outputs back as
plain bytes, checks every call (trials and timed calls alike), takes the time from its own clock
or its own simulated device, and writes the verdict. Nothing the worker says about itself can
raise the verdict (see docs/THREAT_MODEL.md).
"""

from __future__ import annotations

import hashlib
import operator
import os
import secrets
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from kegen.eval.config import DEFAULT_TOLERANCES, EvalConfig
from kegen.eval.errors import CandidateError, ProblemError, TargetUnavailable
from kegen.eval.inputs import InputFactory, clone_all
from kegen.eval.loader import Problem, load_problem
from kegen.eval.models import build_model, call_reference
from kegen.eval.timing import TimingStats
from kegen.eval.trusted import checks, roofline, sandbox
from kegen.eval.trusted.breakdown import Breakdown, call_kind
from kegen.eval.trusted.checker import Comparison, compare_outputs, one_thread
from kegen.eval.trusted.device_pool import device_for
from kegen.eval.trusted.precision import PRECISION_OFFSET, conditioned_comparison, offset_inputs
from kegen.eval.trusted.session import CallResult, WorkerSession
from kegen.eval.trusted.timing_draws import draws, time_mtia
from kegen.eval.wire import outputs_digest
from kegen.targets import GPU_TARGETS

MTIA_METHOD = (
    "simulated by the evaluator's device (mtia_sim cycles at the machine clock, launch overhead included)"
)


def private_problem_copy(path: Path, into: Path) -> tuple[Path, str]:
    """Copy the problem file into a private directory under its content hash; (copy, sha256)."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    target = into / f"problem_{digest[:16]}.py"
    target.write_bytes(data)
    os.chmod(target, 0o400)
    return target, digest


class Evaluator:
    """One evaluation; `run()` returns the result dict (never raises for the candidate's doing)."""

    def __init__(
        self, problem: Path, candidate: Path, baseline: Path | None, config: EvalConfig, mode: str
    ) -> None:
        self.problem_path, self.candidate, self.baseline = problem, candidate, baseline
        self.cfg, self.mode = config, mode
        self.gpu = config.target in GPU_TARGETS
        self.device_name = "cuda" if self.gpu else "cpu"
        self.deadline = time.monotonic() + config.timeout_s
        self._t0 = time.monotonic()
        self.seeds: list[int] = []
        self.history: list[tuple[str, str]] = []  # digests of recent (reference, candidate) outputs
        self._last_inputs: list[Any] = []
        self._verified_calls: list[CallResult] = []  # correct random-trial calls (mtia: timed too)
        self._samples: list[float] = []  # the timed samples (seconds), in order
        self.sample_rooflines: list[float] = []  # the roofline time of each timed sample's inputs (mtia)
        self.sample_baselines: list[float] = []  # the baseline candidate's time on those inputs (mtia)
        self._verified_inputs: list[list[Any]] = []  # their inputs (mtia: the roofline of each sample)
        self.sample_inputs: list[list[Any]] = []  # the inputs of the timed samples (mtia), in order
        self.breakdown = Breakdown(None)  # where the time went (details.breakdown)
        self._credited = 0.0  # seconds of the evaluator's own work given back to the deadline
        self.result: dict[str, Any] = {
            "status": "ok",
            "message": "",
            "target": config.target,
            "machine": config.machine if config.target == "mtia" else "",
            "times": {},
            "speedups": {},
            "details": {},
        }

    def mark(self, phase: str) -> None:
        """Record when a phase ended (details.phases_s: seconds since the evaluation started)."""
        self.result["details"].setdefault("phases_s", {})[phase] = round(time.monotonic() - self._t0, 3)

    # --- seeds ------------------------------------------------------------------------------------
    def seed(self) -> int:
        """A fresh seed: unpredictable, unless the caller asked for reproducible seeds."""
        if self.cfg.extra.get("reproducible") or self.mode == "run":
            s = self.cfg.seed + len(self.seeds)
        else:
            s = secrets.randbits(62)
        self.seeds.append(s)
        return s

    # --- the flow -----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        kind = sandbox.sandbox_kind()
        details = self.result["details"]
        details["sandbox"] = kind.name
        details["network_isolation"] = "namespace" if kind.name == "bwrap" else "python"
        if kind.warning:
            details["sandbox_warning"] = kind.warning
        with tempfile.TemporaryDirectory(prefix="kegen-eval-") as private:
            os.chmod(private, 0o700)
            copy, digest = private_problem_copy(self.problem_path, Path(private))
            details["problem_sha256"] = digest
            try:
                self._run(load_problem(copy))
            except ProblemError as exc:
                return {"problem_error": str(exc).replace(str(copy), str(self.problem_path))}
            except CandidateError as exc:
                self.result.update(status=exc.status, message=exc.message, source_line=exc.source_line)
            except TargetUnavailable as exc:
                self.result.update(
                    status="runtime_error", message=f"target {self.cfg.target} unavailable: {exc}"
                )
        if self.result["status"] != "ok":
            self.result["fitness"] = 0.0
        self.result["seeds"] = list(self.seeds)
        details["breakdown"] = self.breakdown.to_dict()
        return self.result

    def _run(self, problem: Problem) -> None:
        self._check_target()
        self.breakdown = Breakdown(device_for(self.cfg.machine) if self.cfg.target == "mtia" else None)
        factory = InputFactory(problem, self.device_name)
        init_seed = self.seed()
        init = self._init_inputs(factory, init_seed)
        ref = self._reference(problem, factory, init, init_seed)
        self.mark("reference")
        session = self._open(self.candidate)
        self.mark("worker_started")
        lost = getattr(session.worker, "isolation_lost", None)
        if lost:  # what per-worker isolation could not set up here (docs/THREAT_MODEL.md)
            self.result["details"]["isolation_lost"] = list(lost)
        try:
            session.init(init, init_seed, self._worker_config())
            self.mark("candidate_built")
            if self.mode == "run":
                self._run_once(factory, ref, session)
                return
            self._trials(factory, ref, session)
            self.mark("trials")
            samples, last = self._time(factory, ref, session)
            self.mark("timing")
            if last is not None and last.record is not None and last.record.transfers:
                self.result["details"]["transfers"] = last.record.transfer_summary()
            if self.gpu:  # the kernel table, while the worker is open (kegen.eval.trusted.profile_gpu)
                from kegen.eval.trusted.profile_gpu import kernel_pass

                kernel_pass(self, factory, session)
        finally:
            session.close()
            self.mark("worker_closed")
        stats = TimingStats.from_samples(samples, self._method())
        self._samples = samples
        self.result["candidate_time_s"] = stats.median_s
        self.result["times"]["candidate"] = stats.median_s
        self.result["details"]["timing"] = stats.to_dict()
        from kegen.eval.trusted.baselines import problem_roofline, time_baselines

        rf = problem_roofline(self, ref, factory)
        self.mark("roofline")
        time_baselines(self, factory, ref, init, init_seed)
        self.mark("baselines")
        self._speedups(stats.median_s, rf)
        if self.cfg.profile or self.mode == "profile":
            self._profile(stats.median_s, rf, last)
            self.mark("profile")

    def _worker_config(self) -> dict[str, Any]:
        return {
            "target": self.cfg.target,
            "machine": self.cfg.machine,  # the machine is a value in the init message, not the environment
            "allow_ops": list(self.cfg.allow_ops),
            "check_cheats": self.cfg.check_cheats,
        }

    def _check_target(self) -> None:
        if self.gpu and not torch.cuda.is_available():
            raise TargetUnavailable("no GPU is visible to torch (torch.cuda.is_available() is False)")
        if self.gpu:
            self.result["machine"] = torch.cuda.get_device_name()
        elif self.cfg.target == "cpu":
            self.result["machine"] = "host (Triton interpreter)"
        if self.cfg.target == "mtia":
            try:
                import mtia_sim.simulator  # noqa: F401
            except Exception as exc:
                raise TargetUnavailable(
                    f"the mtia simulator does not import: {type(exc).__name__}: {exc}"
                ) from exc

    def _init_inputs(self, factory: InputFactory, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        try:
            return factory.init_inputs()
        except Exception as exc:
            raise ProblemError(f"the problem's get_init_inputs() raised {type(exc).__name__}: {exc}") from exc

    def _reference(self, problem: Problem, factory: InputFactory, init: list[Any], seed: int) -> Any:
        try:
            model = build_model(problem.model_cls, clone_all(init), seed, self.device_name)
            call_reference(model, factory.make(seed), self.gpu)
        except Exception as exc:
            raise ProblemError(
                f"the problem's reference fails: Model(*get_init_inputs())(*get_inputs()) "
                f"raised {type(exc).__name__}: {exc}"
            ) from exc
        return model

    def _open(self, source: Path) -> WorkerSession:
        if source == self.candidate:  # the candidate's clock starts with its worker
            self.deadline = max(self.deadline, time.monotonic() + self.cfg.timeout_s)
        env = sandbox.worker_env(self.cfg.target)
        zygote = sandbox.acquire(env, fresh=self.cfg.fresh_process)
        self._zygote = zygote
        try:
            return WorkerSession(
                zygote,
                source,
                env=env,
                device=device_for(self.cfg.machine) if self.cfg.target == "mtia" else None,
                deadline=self.deadline,
                timeout_s=self.cfg.timeout_s,
                memory_limit_mb=self.cfg.memory_limit_mb,
                out_device=self.device_name,
                machine=self.cfg.machine,
            )
        except Exception:
            zygote.lock.release()
            raise

    # --- one verified call -------------------------------------------------------------------------
    def verified_call(
        self,
        session: WorkerSession,
        ref: Any,
        inputs: list[Any],
        what: str,
        *,
        record: bool = True,
        config: EvalConfig | None = None,
    ) -> tuple[CallResult, Comparison]:
        """Call the candidate on `inputs` (`what` is for the evaluator's eyes only), run the reference
        on a copy, and check everything."""
        spend = self.breakdown.spend
        self.breakdown.calls[call_kind(what)] += 1
        started, spent_before = time.perf_counter(), self.breakdown.candidate_s()
        with spend("reference"):
            ref_out = call_reference(ref, clone_all(inputs), self.gpu)
        self._credit(session, time.perf_counter() - started)  # before the worker's clock runs
        started = time.perf_counter()
        with spend("worker_calls"):
            res = session.call(inputs)
        if res.diag and self.cfg.check_cheats:
            raise CandidateError("cheat_detected", res.diag)
        with spend("compare"), one_thread():
            cmp = compare_outputs(ref_out, res.outputs, config or self.cfg)
            digests = (outputs_digest(ref_out), outputs_digest(res.outputs))
        if self.cfg.check_cheats:
            msg = checks.check_cached(
                [([a], [b]) for a, b in self.history], [digests[0]], [digests[1]], operator.eq
            )
            if msg:
                raise CandidateError("cheat_detected", msg)
            if cmp.ok:
                with spend("precision_check"), one_thread():
                    msg = checks.check_precision(ref_out, res.outputs)
                if msg:
                    raise CandidateError("cheat_detected", msg)
        if record:
            self.history.append(digests)
            self.history = self.history[-8:]
        own = time.perf_counter() - started - (self.breakdown.candidate_s() - spent_before)
        self._credit(session, own)
        return res, cmp

    def _credit(self, session: WorkerSession, seconds: float) -> None:
        """Give the candidate's deadline back the evaluator's own work in a call (reference,
        comparisons, checks; not the worker's time nor the device's replays of its kernels), at
        most `timeout_s` in all: the timeout measures the candidate, not the evaluator's load."""
        amount = min(max(seconds, 0.0), self.cfg.timeout_s - self._credited)
        self._credited += amount
        self.deadline += amount
        session.deadline += amount

    # --- trials ----------------------------------------------------------------------------------------
    def _trials(self, factory: InputFactory, ref: Any, session: WorkerSession) -> None:
        records: list[dict[str, Any]] = []
        worst: Comparison | None = None
        for t in range(self.cfg.trials):
            seed = self.seed()
            inputs = factory.make(seed)
            self._last_inputs = inputs
            res, cmp = self.verified_call(session, ref, inputs, f"candidate forward (trial {t + 1})")
            if cmp.ok:
                self._verified_calls.append(replace(res, outputs=[]))  # time and launches suffice
                if self.cfg.target == "mtia":
                    self._verified_inputs.append(inputs)
            records.append(
                {"trial": t + 1, "kind": "random", "ok": cmp.ok, "max_abs_error": cmp.max_abs_error}
            )
            worst = cmp if worst is None or cmp.max_abs_error >= worst.max_abs_error or not cmp.ok else worst
            if not cmp.ok:
                self._record_errors(records, cmp)
                raise CandidateError("incorrect", f"{cmp.message} (trial {t + 1})")
        self._precision_trial(factory, ref, session, records)
        assert worst is not None
        self._record_errors(records, worst)
        if self.cfg.edge_shapes:
            self._edge_trials(factory, ref, session)

    def _precision_trial(
        self, factory: InputFactory, ref: Any, session: WorkerSession, records: list[dict[str, Any]]
    ) -> None:
        """Inputs offset to large magnitudes: reduced-precision arithmetic fails fp32 tolerances there."""
        inputs = offset_inputs(factory.make(self.seed()))
        if inputs is None:
            return
        try:
            ref_out = call_reference(ref, clone_all(inputs), self.gpu)
        except Exception:
            self.result["details"]["precision_trial"] = "skipped: the reference fails on offset inputs"
            return
        if not all(torch.isfinite(o).all() for o in ref_out if o.is_floating_point()):
            self.result["details"]["precision_trial"] = (
                "skipped: the reference is not finite on offset inputs"
            )
            return
        self._last_inputs = inputs
        strict = strict_tolerances(self.cfg, self._out_dtype(ref_out))
        res, cmp = self.verified_call(session, ref, inputs, "precision trial", record=False, config=strict)
        if not cmp.ok:  # an ill-conditioned reference: its own float32 error allowed (precision.py)
            cmp = conditioned_comparison(ref, inputs, ref_out, res.outputs, strict, self.gpu) or cmp
        records.append(
            {"trial": len(records) + 1, "kind": "precision", "ok": cmp.ok, "max_abs_error": cmp.max_abs_error}
        )
        self.result["details"]["precision_trial"] = "passed" if cmp.ok else "failed"
        if not cmp.ok:
            self._record_errors(records, cmp)
            raise CandidateError(
                "incorrect",
                f"wrong on inputs offset by +{PRECISION_OFFSET:g} (large magnitudes), where "
                f"reduced-precision (fp16/bf16) arithmetic fails the {self._out_dtype(ref_out)} tolerance "
                f"(lowered the precision?): {cmp.message}",
            )

    def _edge_trials(self, factory: InputFactory, ref: Any, session: WorkerSession) -> None:
        from kegen.eval.trusted.edge_trials import edge_trials

        edge_trials(self, factory, ref, session)

    def _record_errors(self, records: list[dict[str, Any]], worst: Comparison) -> None:
        self.result.update(
            max_abs_error=worst.max_abs_error,
            max_rel_error=worst.max_rel_error,
            worst_index=worst.worst_index,
            trials=len(records),
        )
        self.result["details"]["trials"] = records

    @staticmethod
    def _out_dtype(outs: list[torch.Tensor]) -> str:
        return str(outs[0].dtype).removeprefix("torch.") if outs else "output"

    # --- timing -----------------------------------------------------------------------------------------
    def _method(self) -> str:
        if self.cfg.target == "mtia":
            return MTIA_METHOD
        if self.gpu:
            return "cuda events in the worker, one fresh verified input set per timed call (trusted-on-GPU)"
        return "evaluator wall clock around each call (Triton interpreter; development target)"

    def _time(
        self, factory: InputFactory, ref: Any, session: WorkerSession
    ) -> tuple[list[float], CallResult | None]:
        """Times of calls on the run's timing draws, else fresh ones (`timing_draws`); outputs verified."""
        runs = max(1, self.cfg.timing_runs)
        if self.gpu:
            return self._time_gpu(factory, ref, session, max(runs, 10)), None
        if self.cfg.target == "mtia":
            return time_mtia(self, factory, ref, session, runs)
        samples: list[float] = []
        last: CallResult | None = None
        for i, inputs in enumerate(draws(self, factory, runs + 1)):
            last = self.timed_call(session, ref, inputs)
            if i > 0:  # the first call on cpu warms up
                samples.append(last.wall_s)
        return samples, last

    def timed_call(self, session: WorkerSession, ref: Any, inputs: list[Any]) -> CallResult:
        """A verified call whose time counts: a wrong output after the trials passed is a cheat."""
        self._last_inputs = inputs
        res, cmp = self.verified_call(session, ref, inputs, "candidate forward (timed)")
        if not cmp.ok:
            raise CandidateError(
                "cheat_detected",
                "candidate passed the correctness trials but its output in a timed call is wrong "
                "(it skips work on some calls): " + cmp.message,
            )
        return res

    def verified_trials(self) -> list[tuple[CallResult, list[Any]]]:
        """The correct trial calls and their inputs (mtia: the device timed them)."""
        return list(zip(self._verified_calls, self._verified_inputs, strict=False))

    @staticmethod
    def device_seconds(res: CallResult) -> float:
        """Simulated seconds of one call as the evaluator's device measured it."""
        assert res.record is not None
        if res.record.errors:
            raise CandidateError("runtime_error", f"a kernel failed on the device: {res.record.errors[0]}")
        if not res.record.launches:
            raise CandidateError(
                "runtime_error",
                "no mtia kernel launch reached the device during forward: a candidate must launch "
                "@triton.jit kernels on the tensors forward receives",
            )
        return res.record.seconds

    def _time_gpu(self, factory: InputFactory, ref: Any, session: WorkerSession, n: int) -> list[float]:
        sets = draws(self, factory, n)
        refs = [call_reference(ref, clone_all(s), self.gpu) for s in sets]
        samples, outs, wall = session.gpu_time(sets)
        if len(outs) != len(sets):
            raise CandidateError("runtime_error", "the worker returned fewer timed outputs than calls")
        for r, o in zip(refs, outs, strict=True):
            cmp = compare_outputs(r, o, self.cfg)
            if not cmp.ok:
                raise CandidateError(
                    "cheat_detected",
                    "candidate's output in a timed call is wrong (it skips work on some calls): "
                    + cmp.message,
                )
        if any(s <= 0 for s in samples) or sum(samples) > wall:
            raise CandidateError(
                "cheat_detected",
                f"the worker's timings ({sum(samples):.3g} s in all) do not fit the evaluator's wall clock "
                f"({wall:.3g} s) for those calls: forged timing",
            )
        return samples

    # --- baselines, roofline, speedups, profile --------------------------------------------------
    def _speedups(self, t: float, rf: roofline.Roofline | None) -> None:
        times, speedups = self.result["times"], self.result["speedups"]
        for name in ("baseline", "eager", "compile"):
            if name in times and t > 0:
                speedups[name] = times[name] / t
        base = self.sample_baselines  # the baseline on each sample's draw (D49): time over the same inputs
        if base and len(base) == len(self._samples) and sum(self._samples) > 0:
            speedups["baseline"] = sum(base) / sum(self._samples)
        if rf is not None and t > 0:
            pairs = list(zip(self._samples, self.sample_rooflines, strict=False)) or [(t, rf.time_s)]
            speedups["roofline"] = checks.median_fraction(pairs)  # each sample against its own draw
            msg = self.cfg.check_cheats and checks.check_roofline_samples(pairs, self.cfg.roofline_slack)
            if msg:
                raise CandidateError("cheat_detected", msg)
        order = ("baseline", "compile", "eager") if self.cfg.mtia_compile_baseline else ("baseline", "eager")
        primary = next((speedups[n] for n in order if n in speedups), speedups.get("roofline", 0.0))
        self.result["speedup"] = primary
        self.result["fitness"] = primary

    def _profile(self, t: float, rf: roofline.Roofline | None, last: CallResult | None) -> None:
        from kegen.eval.trusted.baselines import build_profile

        try:
            prof = build_profile(self, t, rf, last)
        except Exception as exc:  # a profiler failure must not fail the candidate
            self.result["details"]["profile_error"] = f"{type(exc).__name__}: {exc}"
            return
        self.result["profile"] = prof.to_dict()

    def _run_once(self, factory: InputFactory, ref: Any, session: WorkerSession) -> None:
        from kegen.eval.trusted.baselines import run_once

        run_once(self, factory, ref, session)


def strict_tolerances(cfg: EvalConfig, dtype: str) -> EvalConfig:
    """`cfg` with tolerances no looser than the dtype's defaults (the precision trial's policy)."""
    atol, rtol = DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES["float32"])
    return replace(
        cfg,
        atol=cfg.atol if cfg.atol is not None and cfg.atol < atol else None,
        rtol=cfg.rtol if cfg.rtol is not None and cfg.rtol < rtol else None,
    )

