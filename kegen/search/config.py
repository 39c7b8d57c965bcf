"""The search's configuration: one frozen dataclass per component under `SearchConfig`.

Environment variables are read only by `kegen.settings`; `OperatorConfig.from_settings` takes the
LLM slice from there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kegen.settings import LLMSettings, Settings

POLICIES = ("uct", "greedy", "evolutionary")
OPERATORS = ("offline", "llm", "agent")


@dataclass(frozen=True)
class PolicyConfig:
    """Which node to expand next.

    `draft_children`: children of the root made first, independently (the draft phase).
    `exploration`: UCB1's constant c. `widening`: UCT expands a node again while its number of
    children is below `widening * visits ** 0.5`. `epsilon`: greedy's chance of a random parent.
    `islands`, `tournament`, `migration_every`: the evolutionary policy's population layout.
    `expand_best`: UCT expands the best correct node as soon as it is found (an incumbent without
    children is chosen before the UCB descent; docs/DECISIONS.md D42).
    `draft_supersedes`: UCT stops widening a node once one of its drafted children (another
    drafter's starting point) is this many times as fit (0: off; D60).
    """

    name: str = "uct"
    draft_children: int = 3
    exploration: float = 1.0
    widening: float = 1.5
    epsilon: float = 0.1
    islands: int = 3
    tournament: int = 3
    migration_every: int = 6
    debug_probability: float = 0.0
    expand_best: bool = True
    draft_supersedes: float = 1.25


@dataclass(frozen=True)
class OperatorConfig:
    """How children are written: `offline` (mutations, no network), `llm` (one OpenAI-compatible chat
    call per child) or `agent` (the LLM calls kegen's tools before it answers; docs/LLM.md)."""

    name: str = "offline"
    base_url: str = ""
    api_key: str = ""
    models: tuple[str, ...] = ("gpt-4o-mini",)
    temperature: float = 0.7
    max_tokens: int = 0  # the reply budget (0: auto, from the context and speed; else at most half of it)
    timeout_s: float = 0.0  # the deadline of one proposal, every attempt included (0: auto, from the speed)
    max_retries: int = 4  # retries of fast failures (429, 5xx, dropped connection) within the deadline
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    cost_per_1k_input: float = 0.0
    cost_per_1k_output: float = 0.0
    kb_budget_chars: int = 6000
    history_limit: int = 8
    prompt_budget_tokens: int = 12000  # the whole prompt when the context window is unknown
    context_tokens: int = 0  # the served context window; 0: read it from the server, else unknown
    fallback_after: int = 4  # unusable replies in a row before the offline operator takes over (0: never)
    parallel: int = 0  # LLM proposals in flight at once; 0: one per evaluation slot
    max_calls: int = 0  # proposals that may ask the LLM (0: no limit); then the offline operator writes
    tool_calls: int = 6  # the agent's tool calls per proposal
    tool_tokens: int = 0  # the agent's tool results per proposal, tokens (0: a third of the window)
    tool_wall_s: float = 180.0  # the agent's time in tools per proposal, seconds
    review: bool = False  # a reviewer call flags shortcuts and shape assumptions of each child (recorded)

    @classmethod
    def from_settings(cls, llm: LLMSettings, **overrides: Any) -> OperatorConfig:
        """The operator slice built from `kegen.settings` (env), with explicit overrides on top."""
        base = cls(
            base_url=llm.base_url,
            api_key=llm.api_key,
            models=tuple(llm.models),
            temperature=llm.temperature,
            max_tokens=llm.max_tokens,
            timeout_s=llm.timeout_s,
            max_retries=llm.max_retries,
            context_tokens=llm.context_tokens,
            cost_per_1k_input=llm.cost_per_1k_input,
            cost_per_1k_output=llm.cost_per_1k_output,
        )
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})


@dataclass(frozen=True)
class TerminationConfig:
    """When to stop; whichever limit is reached first wins (0 or None disables a limit)."""

    max_evaluations: int = 12
    time_limit_s: float | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    plateau_steps: int | None = None
    target_speedup: float | None = None
    target_roofline_fraction: float | None = None


@dataclass(frozen=True)
class EvalSliceConfig:
    """How candidates are evaluated: target, machine, worker processes and the evaluator used.

    `evaluator` names a callable `(kegen.eval.request.EvalRequest) -> Outcome` as "module:function"
    (kept as text so a run's config stays plain data; the driver imports it once and hands the
    callable to the executor; tests plug in a fake one; the default calls `kegen.eval`).
    """

    target: str = "mtia"
    machine: str = "mtia-2i"
    jobs: int = 1
    timeout_s: float | None = None
    evaluator: str = "kegen.search.fitness:evaluate_candidate"
    executor: str = "local"  # where evaluations run: "local" (jobs processes) or "ray" (kegen.executor)
    ray_address: str | None = None


@dataclass(frozen=True)
class StoreConfig:
    """Where the search graph lives and whether past runs of the same problem warm-start this one."""

    db: Path = field(default_factory=lambda: Path.home() / ".kegen" / "search.db")
    warm_start: bool = True
    warm_start_nodes: int = 2


@dataclass(frozen=True)
class SearchConfig:
    """The root configuration of one search."""

    problem: Path
    seed: Path | None = None
    # with a seed: kegen's template draft of the problem (where one matches) becomes the seed's child
    template_drafts: bool = False
    out_dir: Path | None = None
    resume: str | None = None
    rng_seed: int = 0
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    operator: OperatorConfig = field(default_factory=OperatorConfig)
    termination: TerminationConfig = field(default_factory=TerminationConfig)
    eval: EvalSliceConfig = field(default_factory=EvalSliceConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    progress: bool = True

    def __post_init__(self) -> None:
        if self.policy.name not in POLICIES:
            raise ValueError(f"unknown policy {self.policy.name!r}; choose one of {', '.join(POLICIES)}")
        if self.operator.name not in OPERATORS:
            raise ValueError(f"unknown operator {self.operator.name!r}; choose one of {', '.join(OPERATORS)}")
        if self.eval.jobs < 0:
            raise ValueError(f"--jobs must be >= 0, got {self.eval.jobs}")

    @classmethod
    def default(cls, problem: Path | str, settings: Settings | None = None, **kw: Any) -> SearchConfig:
        """A configuration with the operator slice taken from the environment's settings."""
        settings = settings or Settings.from_env()
        kw.setdefault("operator", OperatorConfig.from_settings(settings.llm))
        kw.setdefault("store", StoreConfig(db=settings.paths.home / "search.db"))
        kw.setdefault("eval", EvalSliceConfig(machine=settings.sim.machine))
        return cls(problem=Path(problem), **kw)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe view (the API key is never stored)."""
        d = asdict(self)
        d["operator"]["api_key"] = "***" if self.operator.api_key else ""
        return _jsonable(d)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj
