"""Operators write a child candidate from a context built for the step: offline mutations or an LLM."""

from __future__ import annotations

from kegen.search.config import OperatorConfig
from kegen.search.operators.base import Operator, Proposal
from kegen.search.operators.context import ContextBuilder, OperatorContext


def make_operator(config: OperatorConfig, seed: int = 0) -> Operator:
    """The operator named by `config.name` ("offline", "llm" or "agent")."""
    if config.name == "offline":
        from kegen.search.operators.offline import OfflineOperator

        return OfflineOperator(config, seed=seed)
    if config.name == "llm":
        from kegen.search.operators.llm import LLMOperator

        return LLMOperator(config, seed=seed)
    if config.name == "agent":
        from kegen.search.operators.llm.agent import AgentOperator

        return AgentOperator(config, seed=seed)
    raise ValueError(f"unknown operator {config.name!r}; choose offline, llm or agent")


__all__ = ["ContextBuilder", "Operator", "OperatorContext", "Proposal", "make_operator"]
