"""Tuning problems and their measurements through kegen's public APIs: `kegen.eval.evaluate` for
times and profiles, the search `kegen evolve` runs (`run_search`) for winners.

A tuning problem is the model at one input variant's shapes (a standalone KernelBench problem),
seeded with Inductor's draft of it (Inductor's kernels, every op on the device). The offline
operator works on the bottleneck kernel first, so the search spends its evaluations on the hot kernels.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.tune.library import KernelLibrary, library_key

FP32_TOL = (1e-4, 5e-4)


@dataclass
class Measured:
    """One evaluation's outcome, as stored in the library."""

    ok: bool
    time_s: float | None
    message: str = ""
    roofline: float = 0.0
    profile: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measured:
        return cls(
            d["ok"], d.get("time_s"), d.get("message", ""), d.get("roofline", 0.0), d.get("profile", {})
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "time_s": self.time_s,
            "message": self.message,
            "roofline": self.roofline,
            "profile": self.profile,
        }


@dataclass
class Counter:
    """Evaluations this run made (searched candidates included)."""

    evaluations: int = 0


def measure(
    problem: Path,
    source: str,
    target: str,
    machine: str,
    lib: KernelLibrary,
    counter: Counter,
    kind: str,
    shapes: Any,
    seed: int = 42,
    retune: bool = False,
) -> Measured:
    """Evaluate `source` on `problem` (fp32 atol 1e-4, rtol 5e-4; fp16/bf16 the evaluator's
    tolerances), or reuse the library's result for the same sources, shapes, target and machine."""
    from kegen.eval import EvalConfig, evaluate

    # a verdict at fresh inputs is kept: the next run reuses it instead of evaluating again
    key = library_key(kind if kind == "verify" else f"{kind}:{seed}", source, shapes, target, machine)
    if not retune and (hit := lib.get(key)) is not None:
        return Measured.from_dict(hit)
    fp32 = all(s[1] not in ("float16", "bfloat16") for s in shapes if isinstance(s, list))
    atol, rtol = FP32_TOL if fp32 else (None, None)
    cfg = EvalConfig(target=target, machine=machine, seed=seed, atol=atol, rtol=rtol)
    result = evaluate(str(problem), source, config=cfg)
    counter.evaluations += 1
    profile = {
        "time_s": result.profile.get("time_s"),
        "kernels": result.profile.get("kernels", []),
        "launches": [
            {"kernel": la["kernel"], "launch_overhead_s": la.get("launch_overhead_s", 0.0)}
            for la in result.profile.get("launches", [])
        ],
    }
    m = Measured(
        result.ok,
        result.candidate_time_s,
        "" if result.ok else f"{result.status}: {result.message}",
        float(result.speedups.get("roofline", 0.0)),
        profile,
    )
    if result.ok or str(result.status) == "incorrect":
        lib.put(key, m.to_dict())  # other failures (the machine's, the tree's) are measured again
    return m


def _roofline(store: Any, node_id: int | None) -> float | None:
    ev = store.evaluation(node_id) if node_id is not None else None
    return float(ev.roofline_fraction) if ev is not None and ev.roofline_fraction is not None else None


def search(
    problem: Path,
    seed_path: Path,
    budget: int,
    target: str,
    machine: str,
    out_dir: Path,
    lib: KernelLibrary,
    counter: Counter,
    shapes: Any,
    executor: str = "local",
    retune: bool = False,
) -> dict[str, Any]:
    """The best candidate the existing search finds within `budget` evaluations, seeded with
    `seed_path`: {"source", "speedup" (over the seed), "evaluations", "run"}; reused from the library."""
    from kegen.commands import evolve
    from kegen.search.loop import run_search
    from kegen.search.store import GraphStore

    seed_source = seed_path.read_text()
    # "search+drafts": searches that also start from the group's template draft (D62); results stored
    # by earlier versions, seeded with Inductor's draft only, are searched again once
    key = library_key("search+drafts", seed_source, shapes, target, machine)
    hit = lib.get(key)
    if not retune and hit is not None and hit.get("budget", 0) >= budget:
        return {**hit, "evaluations": 0, "reused": True}
    parser = argparse.ArgumentParser()
    evolve.add_arguments(parser)
    args = parser.parse_args(
        [
            str(problem),
            "--seed",
            str(seed_path),
            "--template-drafts",
            "--budget",
            str(budget),
            "--target",
            target,
            "--machine",
            machine,
            "--out",
            str(out_dir),
            "--db",
            str(out_dir.parent / "search.db"),
            "--no-progress",
            "--no-warm-start",
            "--jobs",
            "1",
            "--executor",
            executor,
        ]
    )
    config = evolve.build_config(args)
    store = GraphStore(config.store.db)
    result = run_search(config, store)
    counter.evaluations += result.evaluations
    best = result.best if result.best is not None and result.best.parent_id is not None else None
    root = store.root(result.run_id)
    found = {
        "source": best.code if best is not None else None,
        "speedup": float(best.fitness) if best is not None else 1.0,
        "change": best.description if best is not None else "",
        "budget": budget,
        "run": result.run_id,
        # fraction of the roofline the group problem reached: the seed's and the winner's
        "seed_roofline": _roofline(store, root.id if root is not None else None),
        "roofline": _roofline(store, best.id if best is not None else None),
    }
    lib.put(key, found)
    return {**found, "evaluations": result.evaluations, "reused": False}
