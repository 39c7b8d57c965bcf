"""The evaluation flow inside the worker: load → build → trials → timing → baselines → roofline →
profile → result dict (the JSON the parent turns into an EvalResult)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kegen.eval import cheats, roofline
from kegen.eval.checker import compare_outputs
from kegen.eval.config import EvalConfig
from kegen.eval.errors import CandidateError, ProblemError, TargetUnavailable
from kegen.eval.inputs import InputFactory, clone_all
from kegen.eval.loader import Problem, check_constructor, load_candidate, load_problem
from kegen.eval.profile import Profile, from_host_timing, from_mtia_launches
from kegen.eval.runner import Guards, build_model, call_reference, classify
from kegen.eval.timing import Timing
from kegen.eval.trials import TrialRunner, TrialsOutcome, verdict

GPU_TARGETS = ("nvidia", "amd")
TIMING_SEED_OFFSET = 1000


@dataclass
class Job:
    mode: str
    problem: Path
    candidate: Path
    baseline: Path | None
    config: EvalConfig
    trace_path: Path | None = None
    network_isolation: str = "python"

    @classmethod
    def from_request(cls, req: dict[str, Any]) -> Job:
        config = EvalConfig.from_dict(req["config"])
        trace = req.get("trace_path") or config.extra.get("trace_path")
        return cls(
            mode=req.get("mode", "eval"),
            problem=Path(req["problem"]),
            candidate=Path(req["candidate"]),
            baseline=Path(req["baseline"]) if req.get("baseline") else None,
            config=config,
            trace_path=Path(trace) if trace else None,
            network_isolation=req.get("network_isolation", "python"),
        )


class Harness:
    """One evaluation of one candidate; `run()` returns the result dict and never raises."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.cfg = job.config
        self.gpu = self.cfg.target in GPU_TARGETS
        self.device = "cuda" if self.gpu else "cpu"
        self.result: dict[str, Any] = {
            "status": "ok",
            "message": "",
            "target": self.cfg.target,
            "machine": self.cfg.machine if self.cfg.target == "mtia" else "",
            "times": {},
            "speedups": {},
            "details": {"network_isolation": job.network_isolation},
        }

    def run(self) -> dict[str, Any]:
        try:
            self._run()
        except ProblemError as exc:
            return {"problem_error": str(exc)}
        except CandidateError as exc:
            self.result.update(status=exc.status, message=exc.message, source_line=exc.source_line)
        except TargetUnavailable as exc:
            self.result.update(status="runtime_error", message=f"target {self.cfg.target} unavailable: {exc}")
        if self.result["status"] != "ok":
            self.result["fitness"] = 0.0
        return self.result

    # --- the flow -----------------------------------------------------------------------------
    def _run(self) -> None:
        problem = load_problem(self.job.problem)
        self._check_target()
        factory = InputFactory(problem, self.device)
        ref_model = self._reference(problem, factory)
        guards = Guards(self.job.candidate, self.cfg.allow_ops, self.cfg.check_cheats, self.gpu)
        guards.watch_reference(problem.model_cls)
        cand_cls = load_candidate(self.job.candidate)
        guards.check_tamper()
        init = factory.init_inputs()
        check_constructor(cand_cls, init)
        try:
            cand_model = build_model(cand_cls, init, self.cfg.seed, self.device)
        except Exception as exc:
            raise classify(exc, self.job.candidate, "ModelNew(*get_init_inputs()) failed") from exc
        if self.job.mode == "run":
            self._run_once(factory, ref_model, cand_model, guards)
            return
        if self.job.mode == "ncu":  # one plain forward for Nsight Compute to observe
            with torch.no_grad():
                cand_model(*factory.make(self.cfg.seed))
            torch.cuda.synchronize()
            return
        outcome = TrialRunner(factory, ref_model, cand_model, guards, self.cfg, self.gpu).run()
        guards.check_tamper()
        self._record_errors(outcome)
        failure = verdict(outcome)
        if failure is not None:
            raise failure
        timing = self._time_candidate(factory, ref_model, cand_model, guards)
        rf = self._roofline(problem, ref_model, outcome)
        self._baselines(problem, factory, ref_model, init)
        self._speedups(timing, rf)
        if self.cfg.profile or self.job.mode == "profile":
            try:
                prof = self._profile(timing, rf, cand_model, factory, guards)
            except Exception as exc:  # a profiler failure must not fail the candidate
                self.result["details"]["profile_error"] = f"{type(exc).__name__}: {exc}"
                return
            self.result["profile"] = prof.to_dict()
            library = prof.raw.get("library_kernels")
            if library and self.cfg.check_cheats and not self.cfg.allow_ops:
                raise CandidateError(
                    "cheat_detected",
                    "candidate's forward launched library kernels ("
                    + ", ".join(library[:3])
                    + ") instead of its own Triton kernels",
                )

    def _check_target(self) -> None:
        if self.gpu and not torch.cuda.is_available():
            raise TargetUnavailable("no GPU is visible to torch (torch.cuda.is_available() is False)")
        if self.gpu:
            self.result["machine"] = torch.cuda.get_device_name()
        elif self.cfg.target == "cpu":
            self.result["machine"] = "host (Triton interpreter)"
        if self.cfg.target == "mtia":
            from kegen.eval.timing_mtia import backend_status

            why = backend_status()
            if why:
                raise TargetUnavailable(why)

    def _reference(self, problem: Problem, factory: InputFactory) -> Any:
        try:
            model = build_model(problem.model_cls, factory.init_inputs(), self.cfg.seed, self.device)
            call_reference(model, factory.make(self.cfg.seed), self.gpu)
        except Exception as exc:
            raise ProblemError(
                f"the problem's reference fails: Model(*get_init_inputs())(*get_inputs()) "
                f"raised {type(exc).__name__}: {exc}"
            ) from exc
        return model

    def _record_errors(self, outcome: TrialsOutcome) -> None:
        worst = outcome.worst()
        self.result.update(
            max_abs_error=worst.max_abs_error,
            max_rel_error=worst.max_rel_error,
            worst_index=worst.worst_index,
            trials=len(outcome.records),
            seeds=outcome.seeds,
        )
        self.result["details"]["trials"] = [
            {
                "seed": r.seed,
                "order": r.order,
                "ok": r.comparison.ok,
                "max_abs_error": r.comparison.max_abs_error,
                **({"sizes": r.sizes} if r.sizes else {}),
            }
            for r in outcome.records
        ]
        if outcome.skipped_edges:
            self.result["details"]["skipped_edges"] = outcome.skipped_edges

    # --- timing --------------------------------------------------------------------------------
    def _input_sets(self, factory: InputFactory, first_seed: int) -> list[list[Any]]:
        n = max(1, self.cfg.timing_runs) if not self.gpu else 4
        return [factory.make(first_seed + i) for i in range(n)]

    def _measure(self, call: Any, sets: list[list[Any]], guards: Guards | None) -> Timing:
        target = self.cfg.target
        if target == "mtia":
            from kegen.eval import timing_mtia

            counter = (lambda: cheats.OpGuard.launches) if guards is not None else None
            return timing_mtia.measure(call, sets, self.cfg, expected_launches=counter)
        if self.gpu:
            from kegen.eval import timing_gpu

            return timing_gpu.measure(call, sets, self.cfg)
        from kegen.eval import timing_host

        return timing_host.measure(call, sets, self.cfg)

    def _time_candidate(
        self, factory: InputFactory, ref_model: Any, cand_model: Any, guards: Guards
    ) -> Timing:
        sets = self._input_sets(factory, self.cfg.seed + TIMING_SEED_OFFSET)
        pristine = [clone_all(s) for s in sets]
        simulated = self.cfg.target == "mtia"  # simulated time: guarding every call costs nothing there

        def guarded(inputs: list[Any]) -> Any:
            return guards.call(cand_model, inputs, "candidate forward (timing)", watch_ops=True)

        def plain(inputs: list[Any]) -> Any:  # measured on the clock: checks go after the timed calls
            with torch.no_grad():
                return cand_model(*inputs)

        try:
            timing = self._measure(guarded if simulated else plain, sets, guards)
        except CandidateError:
            raise
        except Exception as exc:
            raise classify(exc, self.job.candidate, "candidate forward (timing)") from exc
        if self.cfg.check_cheats:
            if guards.threads is not None:
                msg = guards.threads.check_after_call()
                if msg:
                    raise CandidateError("cheat_detected", msg)
            guards.check_tamper()
            for note in timing.notes:
                raise CandidateError("cheat_detected", note)
            self._verify_after_timing(timing, pristine, ref_model, cand_model, guards, factory)
        self.result["candidate_time_s"] = timing.stats.median_s
        self.result["times"]["candidate"] = timing.stats.median_s
        self.result["details"]["timing"] = {**timing.stats.to_dict(), **timing.extra}
        return timing

    def _verify_after_timing(
        self,
        timing: Timing,
        pristine: list[list[Any]],
        ref_model: Any,
        cand_model: Any,
        guards: Guards,
        factory: InputFactory,
    ) -> None:
        """The outputs of timed calls must be right too: catches work skipped once checks are over."""
        ref_last = call_reference(ref_model, clone_all(pristine[timing.last_index]), self.gpu)
        from kegen.eval.inputs import flatten_outputs

        cmp = compare_outputs(ref_last, flatten_outputs(timing.last_output), self.cfg)
        if not cmp.ok:
            raise CandidateError(
                "cheat_detected",
                "candidate passed the correctness trials but its output in the "
                "timed runs is wrong (it skips work on some calls): " + cmp.message,
            )
        seed = self.cfg.seed + 2 * TIMING_SEED_OFFSET
        cand_out = guards.call(cand_model, factory.make(seed), "candidate forward (after timing)")
        cmp = compare_outputs(call_reference(ref_model, factory.make(seed), self.gpu), cand_out, self.cfg)
        if not cmp.ok:
            raise CandidateError(
                "cheat_detected",
                "candidate was correct in the trials but wrong after the timed "
                "runs (it skips work on some calls): " + cmp.message,
            )

    # --- baselines, roofline, speedups ------------------------------------------------------------
    def _baselines(self, problem: Problem, factory: InputFactory, ref_model: Any, init: list[Any]) -> None:
        times, details = self.result["times"], self.result["details"]
        sets = self._input_sets(factory, self.cfg.seed + 3 * TIMING_SEED_OFFSET)
        if self.job.baseline is not None:
            try:
                times["baseline"] = self._time_baseline(factory, ref_model, init, sets)
                self.result["baseline_time_s"] = times["baseline"]
            except Exception as exc:  # a broken baseline must not fail the candidate
                details["baseline_error"] = f"{type(exc).__name__}: {exc}"
        if self.cfg.target != "mtia":
            with torch.no_grad():
                times["eager"] = self._measure(lambda x: ref_model(*x), sets, None).stats.median_s
        if self.gpu and self.cfg.compile_baseline:
            from kegen.eval import timing_gpu

            fn, why = timing_gpu.compiled(ref_model)
            try:
                if fn is None:
                    raise RuntimeError(why)
                with torch.no_grad():
                    times["compile"] = self._measure(lambda x: fn(*x), sets, None).stats.median_s
            except Exception as exc:
                details["compile_baseline_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"

    def _time_baseline(
        self, factory: InputFactory, ref_model: Any, init: list[Any], sets: list[list[Any]]
    ) -> float:
        assert self.job.baseline is not None
        cls = load_candidate(self.job.baseline)
        model = build_model(cls, init, self.cfg.seed, self.device)
        seed = self.cfg.seed
        with torch.no_grad():
            out = model(*factory.make(seed))
        from kegen.eval.inputs import flatten_outputs

        cmp = compare_outputs(
            call_reference(ref_model, factory.make(seed), self.gpu), flatten_outputs(out), self.cfg
        )
        if not cmp.ok:
            raise ValueError(f"the baseline is itself incorrect: {cmp.message}")

        def call(x: list[Any]) -> Any:
            with torch.no_grad():
                return model(*x)

        return self._measure(call, sets, None).stats.median_s

    def _roofline(self, problem: Problem, ref_model: Any, outcome: TrialsOutcome) -> roofline.Roofline | None:
        peak: roofline.MachinePeak | None
        try:
            if self.cfg.target == "mtia":
                peak = roofline.mtia_peak(self.cfg.machine)
            elif self.gpu:
                peak = roofline.gpu_peak()
            else:
                return None
        except Exception as exc:
            self.result["details"]["roofline_error"] = f"{type(exc).__name__}: {exc}"
            return None
        if peak is None:
            self.result["details"]["roofline_error"] = "no peak figures for this GPU"
            return None
        try:
            rf = roofline.problem_roofline(ref_model, outcome.first_inputs, outcome.first_ref_out, peak)
        except Exception as exc:
            self.result["details"]["roofline_error"] = f"{type(exc).__name__}: {exc}"
            return None
        self.result["roofline_time_s"] = rf.time_s
        self.result["times"]["roofline"] = rf.time_s
        self.result["details"]["roofline"] = rf.to_dict()
        return rf

    def _speedups(self, timing: Timing, rf: roofline.Roofline | None) -> None:
        t = timing.stats.median_s
        times, speedups = self.result["times"], self.result["speedups"]
        for name in ("baseline", "eager", "compile"):
            if name in times and t > 0:
                speedups[name] = times[name] / t
        if rf is not None and t > 0:
            speedups["roofline"] = rf.time_s / t
            if self.cfg.check_cheats:
                msg = cheats.check_roofline(t, rf.time_s, self.cfg.roofline_slack)
                if msg:
                    raise CandidateError("cheat_detected", msg)
        primary = next(
            (speedups[n] for n in ("baseline", "eager") if n in speedups), speedups.get("roofline", 0.0)
        )
        self.result["speedup"] = primary
        self.result["fitness"] = primary

    # --- profile and `kegen run` ------------------------------------------------------------------
    def _profile(
        self,
        timing: Timing,
        rf: roofline.Roofline | None,
        cand_model: Any,
        factory: InputFactory,
        guards: Guards,
    ) -> Profile:
        rf_dict = rf.to_dict() if rf is not None else {}
        if rf is not None:
            rf_dict["fraction"] = rf.time_s / timing.stats.median_s if timing.stats.median_s else None
        if self.cfg.target == "mtia":
            prof = from_mtia_launches(timing.launches, self.cfg.machine, rf_dict)
            self._mtia_extras(prof, timing)
            return prof
        if self.gpu:
            from kegen.eval import profile_gpu

            inputs = factory.make(self.cfg.seed + 4 * TIMING_SEED_OFFSET)
            return profile_gpu.collect(
                cand_model,
                inputs,
                timing.stats.median_s,
                rf_dict,
                self.cfg,
                self.job,
                full=self.job.mode == "profile",
            )
        return from_host_timing(timing.stats.median_s, rf_dict)

    def _mtia_extras(self, prof: Profile, timing: Timing) -> None:
        if self.job.mode != "profile" or not timing.launches:
            return
        try:
            from mtia_sim import report

            prof.raw["mtia_report_text"] = [report.format_report(r.result) for r in timing.launches]
        except Exception as exc:
            prof.notes.append(f"mtia_sim.report unavailable: {type(exc).__name__}: {exc}")
        if self.job.trace_path is not None:
            try:
                from mtia_sim import trace

                paths = []
                for i, r in enumerate(timing.launches):
                    p = (
                        self.job.trace_path
                        if len(timing.launches) == 1
                        else self.job.trace_path.with_name(
                            f"{self.job.trace_path.stem}.{i}{self.job.trace_path.suffix}"
                        )
                    )
                    paths.append(str(trace.write_trace(r.result, p)))
                prof.raw["trace_files"] = paths
            except Exception as exc:
                prof.notes.append(f"trace not written: {type(exc).__name__}: {exc}")

    def _run_once(self, factory: InputFactory, ref_model: Any, cand_model: Any, guards: Guards) -> None:
        """`kegen run`: one call on seeded inputs; outputs summarised, time, error vs the reference."""
        given = self.cfg.extra.get("inputs_path")
        if given:
            loaded = torch.load(given, weights_only=True)
            inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in loaded]
        else:
            inputs = factory.make(self.cfg.seed)
        sets = [inputs]
        reference_inputs = clone_all(inputs)
        t0 = time.perf_counter()

        def call(x: list[Any]) -> Any:
            return guards.call(cand_model, x, "candidate forward", watch_ops=self.cfg.check_cheats)

        cfg_once = EvalConfig.from_dict(
            {**self.cfg.to_dict(), "timing_runs": 1, "rep_ms": 0.0, "warmup_ms": 0.0}
        )
        saved = self.cfg
        self.cfg = cfg_once
        try:
            timing = self._measure(call, sets, guards)
        finally:
            self.cfg = saved
        from kegen.eval.inputs import flatten_outputs

        outs = flatten_outputs(timing.last_output)
        ref = call_reference(ref_model, reference_inputs, self.gpu)
        cmp = compare_outputs(ref, outs, self.cfg)
        self.result.update(
            candidate_time_s=timing.stats.median_s,
            seeds=[self.cfg.seed],
            trials=1,
            max_abs_error=cmp.max_abs_error,
            max_rel_error=cmp.max_rel_error,
            worst_index=cmp.worst_index,
        )
        self.result["times"]["candidate"] = timing.stats.median_s
        self.result["details"].update(
            outputs=[_summary(o) for o in outs],
            matches_reference=cmp.ok,
            comparison=cmp.message,
            host_wall_s=time.perf_counter() - t0,
        )
        if not cmp.ok:
            self.result["message"] = "output differs from the reference: " + cmp.message


def _summary(t: torch.Tensor) -> dict[str, Any]:
    flat = t.detach().flatten().cpu()
    data: dict[str, Any] = {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
    if flat.numel():
        f = flat.double()
        data.update(first=[float(v) for v in f[:6]], mean=float(f.mean()), abs_max=float(f.abs().max()))
    return data
