"""The evaluator's secondary measurements: baselines (a seed candidate in its own worker, eager,
torch.compile), the roofline, the profile and `kegen run`'s single call. All run in the trusted
evaluator; a baseline candidate runs sandboxed like any candidate."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from kegen.eval.config import EvalConfig
from kegen.eval.errors import CandidateError
from kegen.eval.inputs import InputFactory, clone_all, default_device, flatten_outputs
from kegen.eval.models import call_reference
from kegen.eval.profile import Profile, from_host_timing, from_mtia_launches
from kegen.eval.trusted import memo, roofline
from kegen.eval.trusted.checker import compare_outputs
from kegen.eval.trusted.timing_draws import draws

if TYPE_CHECKING:
    from kegen.eval.trusted.evaluator import Evaluator
    from kegen.eval.trusted.session import CallResult, WorkerSession


def time_baselines(ev: Evaluator, factory: InputFactory, ref: Any, init: list[Any], init_seed: int) -> None:
    """The baselines' times into `ev.result["times"]`: the baseline candidate (the seed), eager and
    torch.compile of the reference. Each is measured once per problem and process (`memo`); on mtia
    the seed once per input fingerprint of the candidate's timed samples (D49)."""
    times, details = ev.result["times"], ev.result["details"]
    if ev.baseline is not None:
        try:
            if ev.cfg.target == "mtia" and ev.sample_inputs:
                per_draw = _baseline_per_draw(ev, factory, ref, init, init_seed)
                ev.sample_baselines = per_draw
                if len(set(per_draw)) > 1:
                    details["baseline_samples_s"] = per_draw
                times["baseline"] = sorted(per_draw)[(len(per_draw) - 1) // 2]
            else:
                times["baseline"] = _baseline_once(ev, factory, ref, init, init_seed)
            ev.result["baseline_time_s"] = times["baseline"]
        except (
            CandidateError,
            RuntimeError,
            ValueError,
        ) as exc:  # a broken baseline must not fail the candidate
            details["baseline_error"] = str(getattr(exc, "message", exc))
    key = memo.problem_key(
        ev,
        "reference",
        init,
        factory.problem.module,
        compile=ev.cfg.compile_baseline,
        mtia_compile=ev.cfg.mtia_compile_baseline,
        **_draw_parts(ev),
    )
    cached = memo.get(key)
    if cached is not None:
        if cached["times"] or cached["details"]:
            memo.note(ev, "eager/compile")
    else:
        cached = _reference_baselines(ev, factory, ref)
        if not _transient(cached):
            memo.put(key, cached)
    times.update(cached["times"])
    details.update(cached["details"])


def _baseline_key(ev: Evaluator, factory: InputFactory, init: list[Any], source: str, **parts: Any) -> str:
    """The memo key of the baseline candidate whose text hashes to `source`."""
    cfg = ev.cfg
    return memo.problem_key(
        ev,
        "baseline",
        init,
        factory.problem.module,
        source=source,
        tolerances=[cfg.atol, cfg.rtol, cfg.trials],
        **parts,
    )


def _draw_parts(ev: Evaluator) -> dict[str, Any]:
    """What a measurement's memo key needs of its draws off mtia: the run's timing seed (D49)."""
    return {} if ev.cfg.target == "mtia" else {"timing_seed": ev.cfg.extra.get("timing_seed")}


def _baseline_once(ev: Evaluator, factory: InputFactory, ref: Any, init: list[Any], init_seed: int) -> float:
    """The baseline candidate's time on draws of its own, measured once per problem and process."""
    assert ev.baseline is not None
    source = _sha256(ev.baseline)
    key = _baseline_key(ev, factory, init, source, **_draw_parts(ev))
    cached = memo.get(key)
    own = ev.result.get("candidate_time_s")
    if cached is None and own and source == _sha256(ev.candidate):
        # the baseline is this very source (a search's root): its time was just measured
        ev.result["details"]["baseline_is_candidate"] = True
        cached = float(own)
    elif cached is None:
        cached = _time_candidate_baseline(ev, factory, ref, init, init_seed)[0]
    else:
        memo.note(ev, "baseline")
        return float(cached)
    memo.put(key, cached)  # a failure raised above is not kept: it may be the machine's (load, a timeout)
    return cached


def _baseline_per_draw(
    ev: Evaluator, factory: InputFactory, ref: Any, init: list[Any], init_seed: int
) -> list[float]:
    """On mtia, the baseline candidate's time on each timed sample's own inputs, in sample order
    (docs/DECISIONS.md D49): a gathering or jagged problem's draws differ in work, so a candidate is
    compared with the seed on the same draw. Memoised per input fingerprint, like the roofline: a
    fixed-shape problem's seed is simulated once per process (the simulator's time depends on the
    shapes and the integer contents, not on the floating-point values)."""
    assert ev.baseline is not None
    source = _sha256(ev.baseline)
    prints = [memo.input_fingerprint(d) for d in ev.sample_inputs]
    keys = [_baseline_key(ev, factory, init, source, inputs=fp) for fp in prints]
    found: dict[str, float] = {}
    for key in keys:
        cached = memo.get(key)
        if cached is not None:
            found[key] = float(cached)
    if found:
        memo.note(ev, "baseline")
    missing = {key: draw for key, draw in zip(keys, ev.sample_inputs, strict=True) if key not in found}
    if missing and source == _sha256(ev.candidate):
        # the baseline is this very source (a search's root): its samples were just measured
        ev.result["details"]["baseline_is_candidate"] = True
        own = dict(zip(keys, ev._samples, strict=True))  # one time per fingerprint, like `missing`
        measured = [own[key] for key in missing]
    elif missing:
        measured = _time_candidate_baseline(ev, factory, ref, init, init_seed, list(missing.values()))
    else:
        measured = []
    for key, seconds in zip(missing, measured, strict=True):
        memo.put(key, seconds)
        found[key] = seconds
    return [found[key] for key in keys]


def _reference_baselines(ev: Evaluator, factory: InputFactory, ref: Any) -> dict[str, dict[str, Any]]:
    """Eager and torch.compile of the reference (trusted code), measured by the evaluator:
    {"times": {...}, "details": {...}} to merge into the result."""
    times: dict[str, Any] = {}
    details: dict[str, Any] = {}
    if ev.cfg.target == "mtia":
        if ev.cfg.mtia_compile_baseline:
            _time_mtia_compile_baseline(ev, times, details)
        return {"times": times, "details": details}
    sets = draws(ev, factory, max(1, ev.cfg.timing_runs))
    needs = needs_default_device(ref, sets[0], ev.device_name)
    details["baseline_default_device"] = needs
    times["eager"] = _measure_in_evaluator(ev, lambda x: ref(*x), sets, needs)
    if ev.gpu and ev.cfg.compile_baseline:
        from kegen.eval import timing_gpu

        fn, why = timing_gpu.compiled(ref)
        try:
            if fn is None:
                raise RuntimeError(why)
            times["compile"] = _measure_in_evaluator(ev, lambda x: fn(*x), sets, needs)
        except Exception as exc:
            details["compile_baseline_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return {"times": times, "details": details}


def _transient(measured: dict[str, dict[str, Any]]) -> bool:
    """A failure that may be the machine's (a timeout under load) is measured again next time."""
    return "timed out" in str(measured["details"].get("compile_baseline_error", "")).lower()


def _time_mtia_compile_baseline(ev: Evaluator, times: dict[str, Any], details: dict[str, Any]) -> None:
    """torch.compile of the reference (trusted code: Inductor's kernels of the problem's Model) on the
    evaluator's simulated machine, in its own process; ops left on the host are named, never timed."""
    from kegen.inductor.baseline import measure_in_subprocess

    data = measure_in_subprocess(ev.problem_path, ev.cfg.machine, timeout_s=ev.cfg.timeout_s)
    if "error" in data:
        details["compile_baseline_error"] = str(data["error"])[:300]
        return
    host_ops = list(data.get("host_ops") or [])
    if host_ops:
        details["compile_baseline_error"] = (
            "torch.compile left work on the host (" + ", ".join(map(str, host_ops[:3])) + "): no device time"
        )
        return
    times["compile"] = float(data["seconds"])
    details["compile_baseline_kernels"] = len(data.get("kernels") or [])


def needs_default_device(ref: Any, inputs: list[Any], device: str) -> bool:
    """Whether the reference relies on a default device: called on `inputs` (already on `device`)
    without `with torch.device(device)`, it fails or returns tensors elsewhere (it makes tensors
    without naming a device, written for host tensors). Only such a reference is timed under that
    context: a torch function mode sends every torch call through Python (2-4 us each), host time
    the reference as written does not have (docs/DECISIONS.md D86)."""
    if torch.device(device).type == "cpu":
        return False
    try:
        with torch.no_grad():
            outs = flatten_outputs(ref(*clone_all(inputs)))
    except Exception:
        return True
    return any(t.device.type != torch.device(device).type for t in outs if isinstance(t, torch.Tensor))


def _measure_in_evaluator(ev: Evaluator, call: Any, sets: list[list[Any]], default: bool) -> float:
    """Trusted code (the reference, torch.compile of it) timed in the evaluator itself, under the
    evaluator's device as the default device where `default` (see `needs_default_device`)."""

    def run(x: list[Any]) -> Any:
        with torch.no_grad(), default_device(ev.device_name if default else "cpu"):
            return call(x)

    if ev.gpu:
        from kegen.eval import timing_gpu

        return timing_gpu.measure(run, sets, ev.cfg).stats.median_s
    from kegen.eval import timing_host

    return timing_host.measure(run, sets, ev.cfg).stats.median_s


def _time_candidate_baseline(
    ev: Evaluator,
    factory: InputFactory,
    ref: Any,
    init: list[Any],
    seed: int,
    per_draw: list[list[Any]] | None = None,
) -> list[float]:
    """The baseline candidate run in its own sandboxed worker, every output checked against the
    reference: one time per input set in `per_draw` (mtia, deterministic), else `[median]` of the
    timing draws (`draws`)."""
    assert ev.baseline is not None
    session = ev._open(ev.baseline)
    try:
        session.init(init, seed, ev._worker_config())
        if per_draw is not None:
            return [_checked_baseline_call(ev, ref, session, inputs) for inputs in per_draw]
        runs = max(1, ev.cfg.timing_runs) + (0 if ev.cfg.target == "mtia" else 1)
        samples = [_checked_baseline_call(ev, ref, session, inputs) for inputs in draws(ev, factory, runs)]
        if ev.cfg.target != "mtia" and len(samples) > 1:
            samples = samples[1:]
        if ev.gpu:
            sets = draws(ev, factory, 10)
            samples, _, _ = session.gpu_time(sets)
    finally:
        session.close()
    return [sorted(samples)[len(samples) // 2]]


def _checked_baseline_call(ev: Evaluator, ref: Any, session: WorkerSession, inputs: list[Any]) -> float:
    """One call of the baseline candidate on `inputs`, its output checked; its time."""
    ref_out = call_reference(ref, clone_all(inputs), ev.gpu)
    res = session.call(inputs)
    cmp = compare_outputs(ref_out, res.outputs, ev.cfg)
    if not cmp.ok:
        raise ValueError(f"the baseline is itself incorrect: {cmp.message}")
    return res.record.seconds if res.record is not None else res.wall_s


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def problem_roofline(ev: Evaluator, ref: Any, factory: InputFactory) -> roofline.Roofline | None:
    """The problem's roofline on the evaluation's machine. On mtia, the roofline of each timed
    sample's own inputs (a jagged or gathering problem moves as many bytes as its draw has rows) and
    the median of them as the result; elsewhere one draw's. Memoised per input fingerprint (`memo`):
    a fixed-shape problem is measured once per process."""
    found: list[roofline.Roofline] = []
    draws: list[list[Any] | None] = list(ev.sample_inputs) or [None]  # None: a draw of its own
    for inputs in draws:
        parts = {} if inputs is None else {"inputs": memo.input_fingerprint(inputs)}
        key = memo.problem_key(ev, "roofline", module=factory.problem.module, **parts)
        rf = memo.get(key)
        if isinstance(rf, roofline.Roofline):
            memo.note(ev, "roofline")
        else:
            rf = _measure_roofline(ev, ref, factory, inputs)
            if rf is None:
                return None
            memo.put(key, rf)
        found.append(rf)
    if ev.sample_inputs:
        ev.sample_rooflines = [rf.time_s for rf in found]
    median = sorted(found, key=lambda r: r.time_s)[(len(found) - 1) // 2]
    ev.result["roofline_time_s"] = median.time_s
    ev.result["times"]["roofline"] = median.time_s
    ev.result["details"]["roofline"] = median.to_dict()
    if len({r.time_s for r in found}) > 1:
        ev.result["details"]["roofline_samples_s"] = ev.sample_rooflines
    return median


def _measure_roofline(
    ev: Evaluator, ref: Any, factory: InputFactory, inputs: list[Any] | None = None
) -> roofline.Roofline | None:
    peak: roofline.MachinePeak | None
    details = ev.result["details"]
    try:
        if ev.cfg.target == "mtia":
            peak = roofline.mtia_peak(ev.cfg.machine)
        elif ev.gpu:
            peak = roofline.gpu_peak()
        else:
            return None
    except Exception as exc:
        details["roofline_error"] = f"{type(exc).__name__}: {exc}"
        return None
    if peak is None:
        details["roofline_error"] = "no peak figures for this GPU"
        return None
    try:
        if inputs is None:
            inputs = factory.make(ev.seed())
        out = call_reference(ref, clone_all(inputs), ev.gpu)
        with default_device(ev.device_name):
            rf = roofline.problem_roofline(ref, inputs, out, peak)
    except Exception as exc:
        details["roofline_error"] = f"{type(exc).__name__}: {exc}"
        return None
    return rf


def build_profile(ev: Evaluator, t: float, rf: roofline.Roofline | None, last: CallResult | None) -> Profile:
    rf_dict = rf.to_dict() if rf is not None else {}
    if rf is not None:
        # the evaluator's figure (on mtia the median of each sample against its own draw's roofline)
        rf_dict["fraction"] = ev.result["speedups"].get("roofline", rf.time_s / t if t else None)
    if ev.cfg.target == "mtia" and last is not None and last.record is not None:
        launches = last.record.launches
        prof = from_mtia_launches(launches, ev.cfg.machine, rf_dict)
        if ev.mode == "profile":
            _mtia_extras(prof, launches, ev.cfg)
        return prof
    if ev.gpu:
        from kegen.eval.trusted.profile_gpu import build_profile as gpu_profile

        return gpu_profile(ev, t, rf_dict)
    return from_host_timing(t, rf_dict)


def _mtia_extras(prof: Profile, launches: list[Any], cfg: EvalConfig) -> None:
    try:
        from mtia_sim import report

        prof.raw["mtia_report_text"] = [report.format_report(r.result) for r in launches]
    except Exception as exc:
        prof.notes.append(f"mtia_sim.report unavailable: {type(exc).__name__}: {exc}")
    trace = cfg.extra.get("trace_path")
    if not trace:
        return
    from pathlib import Path

    try:
        from mtia_sim import trace as sim_trace

        base = Path(trace)
        paths = []
        for i, r in enumerate(launches):
            p = base if len(launches) == 1 else base.with_name(f"{base.stem}.{i}{base.suffix}")
            paths.append(str(sim_trace.write_trace(r.result, p)))
        prof.raw["trace_files"] = paths
    except Exception as exc:
        prof.notes.append(f"trace not written: {type(exc).__name__}: {exc}")


def run_once(ev: Evaluator, factory: InputFactory, ref: Any, session: WorkerSession) -> None:
    """`kegen run`: one call on seeded (or given) inputs; outputs summarised, time, error vs the reference."""
    given = ev.cfg.extra.get("inputs_path")
    if given:
        loaded = torch.load(given, weights_only=True)
        inputs = [x.to(ev.device_name) if isinstance(x, torch.Tensor) else x for x in loaded]
    else:
        inputs = factory.make(ev.seed())
    t0 = time.perf_counter()
    ref_out = call_reference(ref, clone_all(inputs), ev.gpu)
    res = session.call(inputs)
    cmp = compare_outputs(ref_out, res.outputs, ev.cfg)
    t = res.record.seconds if res.record is not None else res.wall_s
    ev.result.update(
        candidate_time_s=t,
        trials=1,
        max_abs_error=cmp.max_abs_error,
        max_rel_error=cmp.max_rel_error,
        worst_index=cmp.worst_index,
    )
    ev.result["times"]["candidate"] = t
    ev.result["details"].update(
        outputs=[_summary(o) for o in res.outputs],
        matches_reference=cmp.ok,
        comparison=cmp.message,
        host_wall_s=time.perf_counter() - t0,
    )
    if not cmp.ok:
        ev.result["message"] = "output differs from the reference: " + cmp.message


def _summary(t: torch.Tensor) -> dict[str, Any]:
    flat = t.detach().flatten().cpu()
    data: dict[str, Any] = {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
    if flat.numel():
        f = flat.double()
        data.update(first=[float(v) for v in f[:6]], mean=float(f.mean()), abs_max=float(f.abs().max()))
    return data
