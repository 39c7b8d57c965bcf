"""The universal operator's context, built per step from the store, the problem and the knowledge base.

It holds: the problem and its PyTorch reference, the parent's code, the parent's failure (error,
tolerance report) or its profile with a short diagnosis, what ancestors and siblings tried and
scored, the knowledge-base documents chosen for this platform and bottleneck, and the constraints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.search.config import OperatorConfig
from kegen.search.policies.base import Selection
from kegen.search.store import Evaluation, GraphStore, Node

CONSTRAINTS = (
    "Write ordinary Triton (@triton.jit) kernels; the module must define `class ModelNew(nn.Module)` "
    "with the same constructor arguments and forward signature as the reference `Model`.",
    "No library fallbacks: forward must not compute the result with torch ops (torch.softmax, torch.matmul, "
    "F.*, ...), only allocate outputs and launch Triton kernels.",
    "No cheats: do not cache or reuse outputs across calls, do not modify inputs, do not skip work, do not "
    "lower the precision, do not touch timers.",
    "Keep every kernel correct for the problem's shapes and dtypes (masks on ragged edges).",
)


@dataclass(frozen=True)
class ProblemInfo:
    """The problem as the operators see it."""

    path: Path
    source: str
    op_class: str | None = None
    op_summary: str = ""
    platform: str = "mtia"
    target: str = "mtia"
    machine: str = "mtia-2i"


@dataclass(frozen=True)
class Diagnosis:
    """A short reading of a profile: what bounds the kernel and where time goes."""

    bound: str | None = None
    stalls: tuple[tuple[str, float], ...] = ()
    utilisation: tuple[tuple[str, float], ...] = ()
    roofline_fraction: float | None = None
    time_s: float | None = None

    def text(self) -> str:
        if self.bound is None and not self.stalls and not self.utilisation:
            return "no profile available"
        parts = [f"{self.bound or 'unknown'}-bound"]
        if self.time_s is not None:
            parts.append(f"time {self.time_s * 1e6:.2f} us")
        if self.roofline_fraction is not None:
            parts.append(f"{self.roofline_fraction:.1%} of roofline")
        if self.utilisation:
            parts.append("utilisation " + ", ".join(f"{u} {v:.0%}" for u, v in self.utilisation))
        if self.stalls:
            parts.append("top stalls " + ", ".join(f"{s} {v:.0%}" for s, v in self.stalls))
        return "; ".join(parts)


@dataclass(frozen=True)
class Attempt:
    """What one related node tried and how it scored."""

    node_id: int
    description: str
    verdict: str | None
    fitness: float
    relation: str  # ancestor | sibling


@dataclass
class OperatorContext:
    """Everything an operator may use to write one child."""

    problem: ProblemInfo
    parent: Node
    parent_code: str
    parent_eval: Evaluation | None
    phase: str
    diagnosis: Diagnosis
    failure: str | None
    attempts: list[Attempt]
    knowledge: list[tuple[str, str]]  # (title, text)
    constraints: tuple[str, ...] = CONSTRAINTS
    known_hashes: frozenset[str] = field(default_factory=frozenset)
    run_id: str = ""
    step: int = 0

    @property
    def ancestors(self) -> list[Attempt]:
        return [a for a in self.attempts if a.relation == "ancestor"]

    @property
    def siblings(self) -> list[Attempt]:
        return [a for a in self.attempts if a.relation == "sibling"]


def diagnose(profile: dict[str, Any] | None) -> Diagnosis:
    """Read the unified profile dict of `kegen.eval` (tolerant of missing keys and older shapes)."""
    if not profile:
        return Diagnosis()
    roof_raw = profile.get("roofline")
    roof: dict[str, Any] = roof_raw if isinstance(roof_raw, dict) else {}
    bound = profile.get("bound") or profile.get("bottleneck") or roof.get("bound")
    util = _utilisation(
        profile.get("utilisation") or profile.get("utilization") or profile.get("units") or {}
    )
    stalls = _stalls(profile.get("top_stall_reasons") or profile.get("stalls") or [])
    frac = profile.get("roofline_fraction", roof.get("fraction"))
    t = profile.get("time_s", profile.get("time"))
    return Diagnosis(
        bound=str(bound) if bound else None,
        stalls=tuple(stalls[:3]),
        utilisation=tuple(util[:5]),
        roofline_fraction=float(frac) if isinstance(frac, int | float) else None,
        time_s=float(t) if isinstance(t, int | float) else None,
    )


def _utilisation(raw: Any) -> list[tuple[str, float]]:
    """{unit: fraction} or [{"name": unit, "utilization": fraction}, ...] -> sorted pairs."""
    items: list[tuple[str, Any]] = []
    if isinstance(raw, dict):
        items = [
            (str(k), v.get("utilisation", v.get("utilization")) if isinstance(v, dict) else v)
            for k, v in raw.items()
        ]
    elif isinstance(raw, list):
        items = [
            (str(u.get("name")), u.get("utilisation", u.get("utilization")))
            for u in raw
            if isinstance(u, dict)
        ]
    out = [(k, float(v)) for k, v in items if isinstance(v, int | float)]
    return sorted(out, key=lambda t: -t[1])


def _stalls(raw: Any) -> list[tuple[str, float]]:
    """Stall reasons as (reason, share of all stall cycles), largest first."""
    pairs: list[tuple[str, float]] = []
    if isinstance(raw, dict):
        pairs = [(str(k), float(v)) for k, v in raw.items() if isinstance(v, int | float)]
    elif isinstance(raw, list):
        for item in raw:
            if isinstance(item, dict):
                val = item.get("fraction", item.get("share", item.get("cycles", 0.0)))
                pairs.append((str(item.get("reason") or item.get("name")), float(val or 0.0)))
            elif isinstance(item, list | tuple) and len(item) >= 2:
                pairs.append((str(item[0]), float(item[1])))
            elif isinstance(item, str):
                pairs.append((item, 0.0))
    total = sum(v for _, v in pairs)
    if total > 1.0 + 1e-9:  # cycles, not shares
        pairs = [(k, v / total) for k, v in pairs]
    return sorted(pairs, key=lambda t: -t[1])


def failure_text(ev: Evaluation | None, node: Node) -> str | None:
    """The parent's failure: verdict, error message, tolerance report (None when it was correct)."""
    if node.correct or node.status != "done":
        return None
    lines = [f"verdict: {node.verdict}"]
    if ev is not None:
        if ev.message:
            lines.append(f"error: {ev.message}")
        for key in ("source_line", "max_abs_error"):
            if ev.metrics.get(key) is not None:
                lines.append(f"{key.replace('_', ' ')}: {ev.metrics[key]}")
    return "\n".join(lines)


class ContextBuilder:
    """Builds `OperatorContext`s from the store, with knowledge chosen for platform and bottleneck."""

    def __init__(
        self,
        store: GraphStore,
        run_id: str,
        problem: ProblemInfo,
        config: OperatorConfig,
        knowledge: Any = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.problem = problem
        self.config = config
        self.kb = knowledge

    def build(self, selection: Selection, step: int = 0) -> OperatorContext:
        parent = self.store.node(selection.parent_id)
        ev = self.store.evaluation(parent.id)
        diag = diagnose(ev.profile if ev else None)
        attempts = [
            Attempt(a.id, a.description, a.verdict, a.fitness, "ancestor")
            for a in self.store.ancestors(parent.id)[: self.config.history_limit]
        ]
        attempts += [
            Attempt(c.id, c.description, c.verdict, c.fitness, "sibling")
            for c in self.store.children(parent.id)[-self.config.history_limit :]
        ]
        hashes = frozenset(n.code_hash for n in self.store.nodes(self.run_id) if n.code_hash)
        phase = selection.phase if parent.correct or selection.phase == "draft" else "debug"
        return OperatorContext(
            problem=self.problem,
            parent=parent,
            parent_code=parent.code or "",
            parent_eval=ev,
            phase=phase,
            diagnosis=diag,
            failure=failure_text(ev, parent),
            attempts=attempts,
            knowledge=self.knowledge_for(diag.bound if parent.correct else "correctness", phase),
            known_hashes=hashes,
            run_id=self.run_id,
            step=step,
        )

    def knowledge_for(self, bottleneck: str | None, phase: str) -> list[tuple[str, str]]:
        """The knowledge-base documents for this platform, op class, bottleneck and phase."""
        if self.kb is None or self.config.kb_budget_chars <= 0:
            return []
        from kegen.knowledge import select_documents

        if bottleneck not in ("memory", "compute", "latency", "correctness"):
            bottleneck = None
        try:
            docs = select_documents(
                self.kb,
                platform=self.problem.platform,
                op_class=self.problem.op_class or "any",
                bottleneck=bottleneck,
                phase=phase,
                budget_chars=self.config.kb_budget_chars,
            )
        except (ValueError, KeyError, OSError):
            return []
        return [(d.title, d.text) for d in docs]


def load_knowledge_base() -> Any:
    """The default knowledge base, or None when it cannot be read (the search goes on without it)."""
    try:
        from kegen.knowledge import KnowledgeBase

        return KnowledgeBase.default()
    except Exception:  # an unreadable KB must not stop a search
        return None
