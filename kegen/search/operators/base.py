"""The operator interface: context in, one proposed child (or a recorded failure) out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kegen.search.operators.context import OperatorContext


@dataclass
class LLMCallRecord:
    """Usage of one chat completion (all attempts of it).

    `reply_kind` is `kegen.search.operators.llm.replies`' reading of the outcome (code, echo,
    truncated, timeout, ...); `tokens_estimated` marks counts estimated from the text because the
    server sent no usage (a call cut off by its deadline or cancelled).
    """

    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    status: str = "ok"
    error: str | None = None
    reply: str | None = None
    finish_reason: str | None = None
    reply_kind: str | None = None
    tokens_estimated: bool = False


@dataclass
class Proposal:
    """A child candidate. `code is None` means the operator produced nothing usable; `error` says why
    and the child is recorded as a failed node (never a crash)."""

    code: str | None
    description: str
    operator: str
    error: str | None = None
    verdict: str | None = None  # no_code | invalid_code when code is None
    template: str | None = None
    prompt: str | None = None
    llm_calls: list[LLMCallRecord] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # the agent's (stored per node)


class Operator(ABC):
    """Writes children. `observe` receives each child's fitness (e.g. for a model bandit)."""

    name = "operator"
    concurrent = False  # True: `propose` may run in worker threads, several at once (the LLM operator)

    @abstractmethod
    def propose(self, ctx: OperatorContext) -> Proposal:
        """One child of `ctx.parent`."""

    def observe(self, proposal: Proposal, parent_fitness: float, fitness: float) -> None:  # noqa: B027
        """Feedback after the child was evaluated (optional)."""

    def restore(self, proposal: Proposal) -> None:  # noqa: B027
        """A child an earlier session of this run wrote, replayed in node order on `--resume` before any
        `observe` of it: state the operator keeps across children (e.g. the LLM fallback) comes back."""

    def set_deadline(self, deadline: float | None) -> None:  # noqa: B027
        """The search's end (a `time.monotonic()` value): no proposal may outlive it (optional)."""

    def cancel(self) -> None:  # noqa: B027
        """Abandon proposals in progress now, e.g. when the search stops (optional)."""
