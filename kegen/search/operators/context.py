"""The universal operator's context, built per step from the store, the problem and the knowledge base.

It holds: the problem and its PyTorch reference, the parent's code, the parent's failure (error,
tolerance report) or its measured profile and diagnosis (`kegen.profiling`), the grandparent's
profile (what the parent changed), what ancestors and siblings tried with their verdicts and error
messages, the knowledge-base documents chosen for this platform and the measured bottleneck, the
problem's reference roofline (for drafting) and the constraints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kegen.profiling import Diagnosis, Profile, diagnose
from kegen.profiling.compare import explain
from kegen.profiling.source import fill_source_text
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
class Attempt:
    """What one related node tried and how it scored."""

    node_id: int
    description: str
    verdict: str | None
    fitness: float
    relation: str  # ancestor | sibling
    error: str = ""  # the evaluator's message when it failed
    effect: str = ""  # why it was faster or slower than its parent (from the two profiles)


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
    profile: Profile | None = None  # the parent's measured profile
    grandparent_profile: Profile | None = None  # the parent's parent's (for "change from the parent")
    reference: dict[str, Any] = field(default_factory=dict)  # the problem's roofline (drafting)
    grandparent_code: str = ""  # the parent's parent's code (what the parent changed: the agent's diff)

    @property
    def ancestors(self) -> list[Attempt]:
        return [a for a in self.attempts if a.relation == "ancestor"]

    @property
    def siblings(self) -> list[Attempt]:
        return [a for a in self.attempts if a.relation == "sibling"]


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
        profile = _profile(ev, parent.code)
        diag = diagnose(ev.profile if ev else None)
        ancestors = self.store.ancestors(parent.id)
        grand = _profile(self.store.evaluation(ancestors[0].id), ancestors[0].code) if ancestors else None
        attempts = [self._attempt(a, "ancestor") for a in ancestors[: self.config.history_limit]]
        attempts += [
            self._attempt(c, "sibling", profile)
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
            profile=profile,
            grandparent_profile=grand,
            reference=self._reference(profile),
            grandparent_code=(ancestors[0].code or "") if ancestors else "",
        )

    def _attempt(self, node: Node, relation: str, parent_profile: Profile | None = None) -> Attempt:
        ev = self.store.evaluation(node.id)
        error = ev.message if ev is not None and not node.correct else ""
        effect = ""
        mine = _profile(ev)
        if parent_profile is not None and mine is not None and node.correct:
            effect = explain(parent_profile, mine)
        return Attempt(node.id, node.description, node.verdict, node.fitness, relation, error, effect)

    def _reference(self, profile: Profile | None) -> dict[str, Any]:
        """The problem's roofline, from this profile or the root's evaluation."""
        if profile is not None and profile.roofline:
            return dict(profile.roofline)
        root = self.store.root(self.run_id)
        root_profile = _profile(self.store.evaluation(root.id)) if root is not None else None
        return dict(root_profile.roofline) if root_profile is not None else {}

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


def _profile(ev: Evaluation | None, code: str | None = None) -> Profile | None:
    """The stored profile of an evaluation as a `Profile` (None when absent or unreadable), its
    source lines' text filled from the node's `code`."""
    if ev is None or not ev.profile:
        return None
    try:
        prof = Profile.from_dict(ev.profile)
    except (TypeError, ValueError):
        return None
    if code:
        fill_source_text(prof.lines, code)
    return prof


def load_knowledge_base() -> Any:
    """The default knowledge base, or None when it cannot be read (the search goes on without it)."""
    try:
        from kegen.knowledge import KnowledgeBase

        return KnowledgeBase.default()
    except Exception:  # an unreadable KB must not stop a search
        return None
