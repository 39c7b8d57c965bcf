"""`kegen tune --target nvidia|amd`: each variant's whole model searched, seeded with torch.compile's
own code for the GPU (`kegen.tune.gpu.draft`, written by the GPU drafter), measured against the
evaluator's torch.compile of the reference; a variant runs the draft or the winner only where it
beats torch.compile (`kegen.tune.gpu.pick`), else torch.compile itself."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from kegen.tune import budget as budget_mod
from kegen.tune.capture import ModelFile, TuneError
from kegen.tune.library import KernelLibrary, library_key
from kegen.tune.problems import Counter, search
from kegen.tune.verify import fresh_seed

GPU_TARGETS = ("nvidia", "amd")


def gpu_module() -> Any:
    """kegen.tune.gpu, imported on first use; TuneError when this tree has no GPU drafter."""
    try:
        return importlib.import_module("kegen.tune.gpu")
    except ImportError as exc:
        raise TuneError(
            f"kegen tune for GPU targets needs kegen.tune.gpu (the GPU drafter), which is missing: {exc}",
            "unsupported_target",
        ) from exc


def _measure(
    problem: Path,
    source: str,
    target: str,
    lib: KernelLibrary,
    counter: Counter,
    kind: str,
    shapes: Any,
    seed: int,
) -> dict[str, Any]:
    key = library_key(
        f"gpu-{kind}" if kind == "verify" else f"gpu-{kind}:{seed}", source, shapes, target, target
    )
    if (hit := lib.get(key)) is not None:
        return hit
    times = gpu_module().measure_vs_compile(problem, source, target, seed=seed).to_dict()
    counter.evaluations += 1
    if times["ok"] or "incorrect" in times.get("message", ""):
        lib.put(key, times)
    return times


def tune_gpu(
    mf: ModelFile,
    problems: list[Path],
    shapes: list[Any],
    opts: Any,
    lib: KernelLibrary,
    counter: Counter,
    state: Any,
    run_dir: Path,
) -> tuple[dict[str, Any], Any]:
    """The GPU target's report entry and its tuned model (a `GpuTunedModel`)."""
    gpu = gpu_module()
    t = opts.target
    drafts, seeds = [], []
    for k, p in enumerate(problems):
        src = state.get(f"gpu_draft/{k}") or state.put(f"gpu_draft/{k}", gpu.draft(p, t))
        (run_dir / "problems" / f"variant{k}_{t}.py").write_text(src)
        drafts.append(src)
        seeds.append(
            state.get(f"{t}/compile/{k}")
            or state.put(f"{t}/compile/{k}", _measure(p, src, t, lib, counter, "draft", shapes[k], 42))
        )
    gains = {str(k): float(s["draft_s"] or 0.0) for k, s in enumerate(seeds) if s["ok"]}
    alloc = budget_mod.allocate(opts.budget, gains)
    variants, installed = [], {}
    for k, p in enumerate(problems):
        found = state.get(f"{t}/search/{k}")
        if found is None:
            found = {"source": None, "speedup": 1.0, "change": ""}
            if alloc.get(str(k), 0) > 0:
                found = search(
                    p,
                    run_dir / "problems" / f"variant{k}_{t}.py",
                    alloc[str(k)],
                    t,
                    t,
                    run_dir / "search" / f"{t}-v{k}",
                    lib,
                    counter,
                    shapes[k],
                    opts.executor,
                    opts.retune,
                )
            state.put(f"{t}/search/{k}", found)
        v = state.get(f"{t}/verify/{k}")
        if v is None:
            seed = fresh_seed()
            tuned = (
                _measure(p, found["source"], t, lib, counter, "verify", shapes[k], seed)
                if found.get("source")
                else None
            )
            v = state.put(f"{t}/verify/{k}", {"tuned": tuned, "seed": seed})
        s, tuned = seeds[k], v["tuned"]
        times = {
            "compile": s.get("compile_s"),
            "draft": s["draft_s"] if s["ok"] else None,
            "tuned": tuned["draft_s"] if tuned and tuned["ok"] else None,
        }
        choice = gpu.pick(times)
        if choice != "compile":
            installed[k] = drafts[k] if choice == "draft" else found["source"]
        variants.append(
            {
                "variant": k,
                "shapes": shapes[k],
                "compile_s": times["compile"],
                "eager_s": s.get("eager_s"),
                "tuned_s": times[choice],
                "verified": choice == "compile"
                or bool(s["ok"] if choice == "draft" else tuned and tuned["ok"]),
                "installed": choice,
                # torch.compile's own module needs no check; anything kegen made was run at fresh inputs
                "checked_by": "torch.compile itself" if choice == "compile" else "fresh inputs",
                "uninstalled": ""
                if not tuned or tuned["ok"]
                else f"winner uninstalled at variant {k}: {tuned['message'][:200]}",
            }
        )
    return _summary(t, variants, alloc, counter), gpu.GpuTunedModel(
        mf, {json.dumps(shapes[k]): src for k, src in installed.items()}
    )


def _summary(
    target: str, variants: list[dict[str, Any]], alloc: dict[str, int], counter: Counter
) -> dict[str, Any]:
    def total(key: str) -> float | None:
        vals = [v[key] for v in variants]
        return sum(vals) if all(x is not None for x in vals) else None

    compile_s, tuned_s, eager_s = total("compile_s"), total("tuned_s"), total("eager_s")
    return {
        "machine": target,
        "mode": "whole-variant (GPU)",
        "verified": all(v["verified"] for v in variants),
        "variants_checked": len(variants),
        "eager_s": eager_s,
        "compile_s": compile_s,
        "tuned_s": tuned_s,
        "speedup_vs_compile": compile_s / tuned_s if compile_s and tuned_s else None,
        "speedup_vs_eager": eager_s / tuned_s if eager_s and tuned_s else None,
        "amdahl_bound": None,
        "hot": [],
        "hot_share": 0.0,
        "budget": alloc,
        "kernels": [],
        "variants": variants,
        "host_ops": [],
    }
