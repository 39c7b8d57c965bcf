"""The `kegen tune` pipeline: capture, measure, triage, search under one budget, install, verify,
report; every finished step is written to the run directory's state.json so `--resume` continues."""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.tune import budget as budget_mod
from kegen.tune.capture import (
    ModelFile,
    TuneError,
    check_capturable,
    draft,
    load_model_file,
    shapes_of,
    write_variant_problems,
)
from kegen.tune.gpu_run import GPU_TARGETS, gpu_module, tune_gpu
from kegen.tune.install import TunedModel, choose, kernel_rows
from kegen.tune.kernels import plan_variant, tune_kernels
from kegen.tune.library import KernelLibrary
from kegen.tune.partition import PartitionError
from kegen.tune.problems import Counter, measure, search
from kegen.tune.triage import triage
from kegen.tune.verify import fresh_seed, verify_variant


@dataclass
class TuneOptions:
    target: str = "mtia"
    machines: tuple[str, ...] = ("mtia-2i",)
    budget: int = 8
    out: Path | None = None
    library: Path | None = None
    retune: bool = False
    executor: str = "local"
    coverage: float = 0.9


@dataclass
class TuneReport:
    """What `kegen tune` found; `summary()` is the --json object."""

    model: str
    run_dir: Path
    machines: dict[str, dict[str, Any]] = field(default_factory=dict)
    evaluations: int = 0
    tuned: dict[str, TunedModel] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        first = next(iter(self.machines.values()), {})
        return {
            "status": "ok",
            "model": self.model,
            "run_dir": str(self.run_dir),
            "verified": all(m["verified"] for m in self.machines.values()),
            "variants_checked": first.get("variants_checked", 0),
            "speedup_vs_compile": first.get("speedup_vs_compile"),
            "speedup_vs_eager": first.get("speedup_vs_eager"),
            "kernels": first.get("kernels", []),
            "evaluations": self.evaluations,
            "machines": {
                name: {k: v for k, v in m.items() if k != "kernels_full"} for name, m in self.machines.items()
            },
        }


class State:
    """Finished steps of a run (state.json), written atomically after each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}

    def get(self, key: str) -> Any:
        return self.done.get(key)

    def put(self, key: str, value: Any) -> Any:
        self.done[key] = value
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.done, indent=1))
        tmp.replace(self.path)
        return value


def _default_library() -> Path:
    from kegen.settings import load_settings

    return Path(load_settings().paths.home) / "tune_library.json"


def tune_file(
    model_path: str | Path, options: TuneOptions | None = None, resume: Path | None = None
) -> TuneReport:
    """Tune the model in a KernelBench-layout file on every machine of `options`; raises TuneError."""
    opts = options or TuneOptions()
    if opts.budget < 0:
        raise TuneError(f"--budget must be >= 0 (got {opts.budget})")
    if opts.target in GPU_TARGETS:
        gpu_module()  # a clear TuneError before any work when the GPU drafter is missing
    elif opts.target != "mtia":
        raise TuneError(
            f"kegen tune targets mtia, nvidia and amd (got {opts.target})",
            "unsupported_target",
        )
    mf = load_model_file(model_path)
    run_dir = (
        Path(resume)
        if resume
        else Path(opts.out or f"kegen-runs/tune-{Path(model_path).stem}-{int(time.time())}")
    )
    if resume and not (run_dir / "state.json").is_file():
        raise TuneError(f"--resume {run_dir}: no state.json there (not a kegen tune run directory)")
    run_dir.mkdir(parents=True, exist_ok=True)
    # written first: `kegen tune --resume RUN` after a kill -9 finds the model here
    (run_dir / "model.txt").write_text(str(Path(model_path).resolve()))
    if not resume:
        options_file = {
            "target": opts.target,
            "machines": list(opts.machines),
            "budget": opts.budget,
            "library": str(Path(opts.library).resolve()) if opts.library else None,
            "retune": opts.retune,
            "executor": opts.executor,
        }
        (run_dir / "options.json").write_text(json.dumps(options_file, indent=1))
    state = State(run_dir / "state.json")
    model_hash = hashlib.sha256(Path(model_path).read_bytes()).hexdigest()
    if state.get("model_sha256") not in (None, model_hash):
        if resume:
            raise TuneError(
                f"--resume {run_dir}: {model_path} changed since this run started, so its finished steps "
                "no longer describe it; start a new run (without --resume)"
            )
        state.done = {}  # a new run into an old run's directory starts over
    state.put("model_sha256", model_hash)
    if state.get("captured") is None:
        check_capturable(mf)
        state.put("captured", True)
    problems = write_variant_problems(mf, run_dir / "problems")
    shapes = [shapes_of(v) for v in mf.variants]
    lib = KernelLibrary(opts.library or _default_library())
    counter = Counter()
    report = TuneReport(str(model_path), run_dir)
    if opts.target in GPU_TARGETS:  # torch.compile's own GPU code is the seed (kegen.tune.gpu)
        report.machines[opts.target], report.tuned[opts.target] = tune_gpu(
            mf, problems, shapes, opts, lib, counter, state, run_dir
        )
        report.evaluations = counter.evaluations
        return report
    plans, why = _plans(mf, problems, state, run_dir / "problems")
    drafts = {}
    for k, p in enumerate(problems):
        whole = plans[k]["whole"] if plans else None
        fused = state.get(f"draft/{k}") or state.put(f"draft/{k}", whole or draft(p))
        try:
            eager = state.get(f"eager_draft/{k}") or state.put(f"eager_draft/{k}", draft(p, fused=False))
        except TuneError:
            eager = None
        drafts[k] = (fused, eager)
        (run_dir / "problems" / f"variant{k}_inductor.py").write_text(fused)
    for machine in opts.machines:
        report.machines[machine] = _tune_machine(
            mf, problems, drafts, shapes, machine, opts, lib, counter, state, run_dir, plans
        )
        report.machines[machine]["mode"] = "per-kernel" if plans else f"whole-variant ({why})"
        report.tuned[machine] = TunedModel(
            mf,
            {
                json.dumps(shapes[k]): src
                for k, src in enumerate(report.machines[machine].pop("installed_sources"))
            },
            machine,
        )
    report.evaluations = counter.evaluations
    return report


def _tune_machine(
    mf: ModelFile,
    problems: list[Path],
    drafts: dict[int, tuple[str, str | None]],
    shapes: list[Any],
    machine: str,
    opts: TuneOptions,
    lib: KernelLibrary,
    counter: Counter,
    state: State,
    run_dir: Path,
    plans: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    t = opts.target
    seeds, eagers = [], []
    for k, p in enumerate(problems):
        fused, eager = drafts[k]
        key = f"{machine}/compile/{k}"
        seeds.append(
            state.get(key)
            or state.put(
                key,
                measure(
                    p, fused, t, machine, lib, counter, "compile", shapes[k], retune=opts.retune
                ).to_dict(),
            )
        )
        if not seeds[-1]["ok"]:
            raise TuneError(
                f"Inductor's draft of variant {k} fails on {machine}: {seeds[-1]['message']}", "capture"
            )
        key = f"{machine}/eager/{k}"
        e = state.get(key)
        if e is None and eager is not None:
            e = state.put(
                key,
                measure(p, eager, t, machine, lib, counter, "eager", shapes[k], retune=opts.retune).to_dict(),
            )
        eagers.append(e)
    if plans:
        return _machine_summary(
            machine,
            seeds,
            eagers,
            shapes,
            tune_kernels(mf, problems, plans, seeds, shapes, machine, opts, lib, counter, state, run_dir),
        )
    tri = [triage(s["profile"], opts.coverage) for s in seeds]
    gains = {
        str(k): budget_mod.expected_gain(s["time_s"], tr.hot_share, s["roofline"])
        for k, (s, tr) in enumerate(zip(seeds, tri, strict=True))
    }
    alloc = budget_mod.allocate(opts.budget, gains)
    installed_sources, verdicts, changes, installed = [], [], [], []
    for k, p in enumerate(problems):
        fused = drafts[k][0]
        key = f"{machine}/search/{k}"
        found = state.get(key)
        if found is None:
            found = {"source": None, "speedup": 1.0, "change": "", "evaluations": 0}
            if alloc[str(k)] > 0:
                seed_path = run_dir / "problems" / f"variant{k}_inductor.py"
                found = search(
                    p,
                    seed_path,
                    alloc[str(k)],
                    t,
                    machine,
                    run_dir / "search" / f"{machine}-v{k}",
                    lib,
                    counter,
                    shapes[k],
                    opts.executor,
                    opts.retune,
                )
            state.put(key, found)
        best_time = (
            seeds[k]["time_s"] / found["speedup"] if found.get("source") and found["speedup"] > 0 else None
        )
        winner = found["source"] if choose(seeds[k]["time_s"], best_time, found.get("source")) else None
        key = f"{machine}/verify/{k}"
        v = state.get(key)
        if v is None:
            seed = fresh_seed()
            verdict, src = verify_variant(
                k, p, winner, fused, t, machine, lib, counter, shapes[k], seed, opts.retune
            )
            v = state.put(
                key,
                {
                    "ok": verdict.ok,
                    "time_s": verdict.time_s,
                    "profile": verdict.profile,
                    "uninstalled": verdict.uninstalled,
                    "source": src,
                    "seed": seed,
                },
            )
        verdicts.append(v)
        installed_sources.append(v["source"])
        installed.append(v["source"] != fused)
        changes.append(found.get("change", ""))
    ok = all(v["ok"] for v in verdicts)
    rows = kernel_rows(
        [s["profile"] for s in seeds],
        [v["profile"] for v in verdicts],
        {ks.name: ks.share for ks in tri[0].kernels},
        installed,
        changes,
    )
    return {
        "machine": machine,
        "verified": ok,
        "variants_checked": len(verdicts),
        **_model_times(seeds, verdicts, eagers, installed),
        "amdahl_bound": tri[0].amdahl_bound,
        "hot": tri[0].hot,
        "hot_share": tri[0].hot_share,
        "budget": alloc,
        "kernels": rows,
        "variants": [
            {
                "variant": k,
                "shapes": shapes[k],
                "compile_s": s["time_s"],
                "tuned_s": v["time_s"],
                "verified": v["ok"],
                "installed": inst,
                "uninstalled": v["uninstalled"],
                "roofline": s["roofline"],
            }
            for k, (s, v, inst) in enumerate(zip(seeds, verdicts, installed, strict=True))
        ],
        "host_ops": [],
        "installed_sources": installed_sources,
    }


def _plans(
    mf: ModelFile, problems: list[Path], state: State, out_dir: Path
) -> tuple[list[dict[str, Any]] | None, str]:
    """Every variant cut into per-kernel problems (kept in state.json), or None and why not: then
    the run tunes each variant's whole model as one problem (the fallback)."""
    plans = []
    for k, p in enumerate(problems):
        plan = state.get(f"plan/{k}")
        if plan is None:
            try:
                plan = plan_variant(mf, p, k, out_dir)
            except (PartitionError, TuneError) as exc:
                plan = {"error": f"{type(exc).__name__}: {exc}"}
            state.put(f"plan/{k}", plan)
        if "error" in plan:
            return None, f"variant {k} not cut into kernels: {plan['error'][:200]}"
        plans.append(plan)
    return plans, ""


def _machine_summary(
    machine: str,
    seeds: list[dict[str, Any]],
    eagers: list[dict[str, Any] | None],
    shapes: list[Any],
    found: dict[str, Any],
) -> dict[str, Any]:
    """The report entries of a per-kernel tuned machine."""
    verdicts = found["variants"]
    ok = all(v["ok"] for v in verdicts)
    tri = found["triage"]
    return {
        "machine": machine,
        "verified": ok,
        "variants_checked": len(verdicts),
        **_model_times(seeds, verdicts, eagers, [v["composed"] for v in verdicts]),
        "amdahl_bound": tri.amdahl_bound if tri else 1.0,
        "hot": tri.hot if tri else [],
        "hot_share": tri.hot_share if tri else 0.0,
        "budget": found["budget"],
        "kernels": found["rows"],
        "variants": [
            {
                "variant": k,
                "shapes": shapes[k],
                "compile_s": s["time_s"],
                "tuned_s": v["time_s"],
                "verified": v["ok"],
                "installed": v["composed"],
                "winners": len(v["winners"]),
                "uninstalled": v["uninstalled"],
                "roofline": s["roofline"],
            }
            for k, (s, v) in enumerate(zip(seeds, verdicts, strict=True))
        ],
        "host_ops": [],
        "installed_sources": found["sources"],
    }


def _model_times(
    seeds: list[dict[str, Any]],
    verdicts: list[dict[str, Any]],
    eagers: list[dict[str, Any] | None],
    installed: list[bool],
) -> dict[str, float | None]:
    """A machine's model times summed over the variants, and the speedups. A variant where nothing was
    installed, or whose winner was not verified, runs Inductor's kernels: it is charged the compile time
    (measured at the inputs the compile time was, not at verification's fresh ones, which can differ
    where kernels' work depends on the values, e.g. gathers)."""
    compile_s = sum(s["time_s"] for s in seeds)
    tuned_s = sum(
        v["time_s"] if inst and v["ok"] and v["time_s"] else s["time_s"]
        for v, s, inst in zip(verdicts, seeds, installed, strict=True)
    )
    eager_s = sum(e["time_s"] for e in eagers if e) if all(e and e.get("ok") for e in eagers) else None
    return {
        "eager_s": eager_s,
        "compile_s": compile_s,
        "tuned_s": tuned_s,
        "speedup_vs_compile": compile_s / tuned_s if tuned_s else None,
        "speedup_vs_eager": eager_s / tuned_s if eager_s and tuned_s else None,
    }


def geomean(values: list[float]) -> float:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else 0.0
