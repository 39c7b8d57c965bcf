"""Creating or reopening a search run: the seed (given or drafted), the root, alternative drafts and
warm-start nodes from past runs of the same problem."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.search.compile_candidate import add_compile_candidate
from kegen.search.config import SearchConfig
from kegen.search.store import GraphStore, code_hash


def problem_key(problem_source: str, target: str, machine: str) -> str:
    """Same problem text (shapes included: they are the problem's constants), target and machine."""
    return hashlib.sha256(f"{problem_source}\0{target}\0{machine}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class RunStart:
    """The run a search works on, its directory, its seed file and the problem's op class."""

    run_id: str
    out_dir: Path
    baseline: Path
    op_class: str | None
    op_summary: str
    # one secret seed per run (and per resume: never stored, where a candidate could read it) for the
    # inputs every candidate is timed on, so a variable-input problem compares them on the same draws
    timing_seed: int = field(default_factory=lambda: secrets.randbits(62))

    def eval_overrides(self) -> dict[str, Any]:
        """EvalConfig fields every evaluation of the run gets (docs/DECISIONS.md D49)."""
        return {"extra": {"timing_seed": self.timing_seed}}


def start_run(c: SearchConfig, store: GraphStore, problem_path: Path, source: str) -> RunStart:
    """Create the run (or reopen `c.resume`) and write its first nodes."""
    if c.resume:
        run = store.get_run(c.resume)
        if Path(run.problem_path) != problem_path:
            raise ValueError(
                f"run {run.id} searched {run.problem_path}, not {problem_path}; "
                "pass that problem file with --resume"
            )
        store.reopen_run(run.id)
        out_dir = Path(run.out_dir or Path("kegen-runs") / run.id)
        out_dir.mkdir(parents=True, exist_ok=True)
        baseline = out_dir / "seed.py"
        root = store.root(run.id)
        if root is None or root.code is None:
            raise RuntimeError(f"run {run.id} has no seed node; it cannot be resumed, start a new run")
        if not baseline.is_file():
            baseline.write_text(root.code)
        return RunStart(run.id, out_dir, baseline, *_op_class_of(problem_path))
    seed_code, description, op_class, summary, alt_drafts = _seed(c, problem_path)
    key = problem_key(source, c.eval.target, c.eval.machine)
    run_id = store.create_run(
        problem_path=str(problem_path),
        problem_key=key,
        target=c.eval.target,
        machine=c.eval.machine,
        seed_hash=code_hash(seed_code),
        config=c.to_dict(),
        out_dir=None,
    )
    out_dir = Path(c.out_dir or Path("kegen-runs") / run_id).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    with store.transaction() as db:
        db.execute("UPDATE runs SET out_dir = ? WHERE id = ?", (str(out_dir), run_id))
    baseline = out_dir / "seed.py"
    baseline.write_text(seed_code)
    store.add_artifact(run_id, None, "seed", path=str(baseline))
    root_id = store.add_node(
        run_id,
        parent_id=None,
        code=seed_code,
        operator="seed",
        description=description,
        target=c.eval.target,
    )
    for draft in alt_drafts:
        if code_hash(draft.source) != code_hash(seed_code):
            store.add_node(
                run_id, parent_id=root_id, code=draft.source, operator="draft",
                description=draft.description, target=c.eval.target,
            )  # fmt: skip
    drafted = {code_hash(seed_code)} | {code_hash(d.source) for d in alt_drafts}
    add_compile_candidate(store, run_id, root_id, problem_path, c.eval.target, drafted, seed_code=seed_code)
    if c.store.warm_start:
        for node, past in store.best_from_past_runs(key, run_id, c.store.warm_start_nodes):
            if node.code and node.code_hash != code_hash(seed_code):
                store.add_node(
                    run_id,
                    parent_id=root_id,
                    code=node.code,
                    operator="warm_start",
                    description=f"warm start from run {past.id} node {node.id} ({node.fitness:.3f}x there)",
                    target=c.eval.target,
                )
    return RunStart(run_id, out_dir, baseline, op_class, summary)


def _seed(c: SearchConfig, problem_path: Path) -> tuple[str, str, str | None, str, list[Any]]:
    """(seed code, description, op class, op summary, other drafts) from --seed or the drafter."""
    from kegen.search.operators.drafting import analyze, draft_seeds, template_drafts

    if c.seed is not None:
        seed = Path(c.seed)
        if not seed.is_file():
            raise FileNotFoundError(f"seed candidate {seed} does not exist")
        try:
            a = analyze(problem_path)
            op_class, summary = a.op_class, a.summary
        except Exception:  # analysis is advisory when a seed is given
            a, op_class, summary = None, None, ""
        others = []
        if c.template_drafts and a is not None:
            others = template_drafts(a, problem_path, c.eval.target)
        return seed.read_text(), f"seed {seed.name}", op_class, summary, others
    # the default draft (TorchInductor's) is the root; other drafts become its children
    drafts, a = draft_seeds(problem_path, target=c.eval.target)
    description = f"drafted from the reference ({a.summary}); {drafts[0].description}"
    return drafts[0].source, description, a.op_class, a.summary, drafts[1:]


def _op_class_of(path: Path) -> tuple[str | None, str]:
    try:
        from kegen.search.operators.drafting import analyze

        a = analyze(path)
        return a.op_class, a.summary
    except Exception:  # advisory only
        return None, ""
