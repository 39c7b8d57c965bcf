"""The offline operator (the default; no network): profile-steered source mutations.

Per step it lists every mutation that applies to the parent (block sizes, launch options,
knowledge-base recipes, whole plans sized from the parent's measured grid: `mutations.plans`)
and scores each from the parent's diagnosis (`kegen.profiling.diagnosis`,
the same object the prompts render): the weights of the remedy kinds the mutation provides, minus
those it works against, damped when it changes another kernel than the one the bottleneck was read
from; plus what each family of mutations has gained so far in this search, and a little noise. A
mutation that made some other node faster and is not yet in this node's lineage ranks first
(`TRANSPLANT_MIN_GAIN`): winners found on different branches get combined (a GELU rewrite that won on
the seed is tried on the re-tiled kernel that later became the best) instead of the family average
of a move that won big on a weak parent crowding it out. Those transplants come first (best score
first), then the rest by score; it returns the first whose result is not already in the tree. With
the diagnosis withheld (`use_diagnosis=False`, the ablation's control arm) only priors, gains and
noise remain.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import logging
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kegen.profiling import Diagnosis
from kegen.search.config import OperatorConfig
from kegen.search.operators import lifted_wrapper
from kegen.search.operators.base import Operator, Proposal
from kegen.search.operators.context import OperatorContext
from kegen.search.operators.dot_precision import (
    TF32_DEFAULT_TARGETS,
    computes_in_float32,
    exact_dots,
    states_exact_dots,
)
from kegen.search.operators.mutations import Mutation, MutationError, knob_mutations, recipe_mutations
from kegen.search.operators.mutations.blocks import block_mutations, find_blocks, tile_mutations
from kegen.search.operators.mutations.epilogue import fusion_mutations
from kegen.search.operators.mutations.gemm_plan import epilogue_mutations, gemm_plan_mutations
from kegen.search.operators.mutations.gpu_moves import gpu_mutations
from kegen.search.operators.mutations.launch_batch import batch_mutations
from kegen.search.operators.mutations.memory import (
    attention_mutations,
    attention_persist_mutations,
    attention_pipeline_mutations,
    attention_plan_mutations,
    attention_rescale_mutations,
    balance_mutations,
    embedding_mutations,
    norm_mutations,
    segment_balance_mutations,
)
from kegen.search.operators.mutations.plans import plan_mutations
from kegen.search.operators.mutations.rows import row_mutations
from kegen.search.operators.mutations.vectorize import vectorize_mutations
from kegen.search.operators.mutations.waves import wave_tile_mutations
from kegen.search.operators.templates.conv.rows import conv_mutations
from kegen.search.operators.templates.conv.stationary import stationary_mutations
from kegen.search.operators.templates.linear_stationary import stationary_mutations as linear_mutations
from kegen.search.operators.templates.m_halves import m_halves_mutations
from kegen.search.store import code_hash

log = logging.getLogger(__name__)

UNTRIED_BONUS = 0.5
TRANSPLANT_MIN_GAIN = 0.02  # a move that made its parent this much faster elsewhere is tried here first
OTHER_KERNEL = 0.3  # weight of a diagnosis on a mutation of another kernel than the bottleneck's
DIAGNOSIS_CAP = 2.0  # the diagnosis term is clipped to [-cap, cap]


def _block_site(m: Mutation) -> str | None:
    """`@kernel:PARAM` of a knob block mutation named `PARAM=VALUE@kernel`, else None."""
    if m.family not in ("block_up", "block_down") or "=" not in m.name or "@" not in m.name:
        return None
    return f"@{m.name.rsplit('@', 1)[1]}:{m.name.split('=', 1)[0]}"


class OfflineOperator(Operator):
    """Mutates the parent's Triton source; learns which mutation families pay off."""

    name = "offline"

    def __init__(self, config: OperatorConfig, seed: int = 0, *, use_diagnosis: bool = True) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.gains: dict[str, list[float]] = defaultdict(list)
        self.wins: dict[str, float] = {}  # a move's description -> its best gain over its parent so far
        self.use_diagnosis = use_diagnosis

    def candidates(self, ctx: OperatorContext) -> list[Mutation]:
        """Every mutation that applies to the parent. A move finder that breaks on this source (a
        defect in the move, not in the candidate) is left out with a warning; the others are listed."""
        code = ctx.parent_code
        try:
            ast.parse(code)
        except SyntaxError:
            return []
        parts = lifted_wrapper.split(code)
        if parts is not None:  # a kernel group's draft: moves rewrite the module inside the views
            inner = self.candidates(dataclasses.replace(ctx, parent_code=parts[0]))
            return [lifted_wrapper.rewrapped(m, parts[1]) for m in inner]
        launch = ctx.problem.target == "mtia"

        def moves(finder: Callable[..., list[Any]], *args: Any, **kwargs: Any) -> list[Any]:
            try:
                return finder(code, *args, **kwargs)
            except SyntaxError:
                return []
            except Exception as exc:  # noqa: BLE001 - a defective move must not end the search
                _warn_once(getattr(finder, "__name__", repr(finder)), exc)
                return []

        recipes = moves(recipe_mutations, ctx.problem.platform)
        recipes += moves(row_mutations)
        recipes += moves(embedding_mutations)  # embedding bags: the segment gather
        recipes += moves(attention_mutations)  # online softmax: exp2, scale in Q
        if launch:  # the next key block's scores ahead of this block's softmax (mtia's in-order queues)
            recipes += moves(attention_pipeline_mutations)
            recipes += moves(attention_persist_mutations)  # one program per PE walking tiles
            recipes += moves(attention_rescale_mutations)  # softmax on a fixed reference, unrolled
            recipes += moves(attention_plan_mutations)  # the attention moves' best composition at once
            recipes += moves(balance_mutations)  # embedding bags: one program per core
            recipes += moves(segment_balance_mutations)  # jagged: segments balanced by rows
        recipes += moves(norm_mutations)  # row kernels: rows per program, pipelined
        recipes += moves(epilogue_mutations)  # cheaper epilogue math (GELU as a sigmoid)
        recipes += moves(fusion_mutations)  # a GEMM's pointwise consumer in its epilogue
        recipes += moves(batch_mutations)  # one launch for a cat's per-input copies
        knobs = moves(knob_mutations, launch_options=launch)
        sites = {f"@{s.kernel}:{s.param}" for s in moves(find_blocks)}
        blocks = moves(block_mutations) + moves(tile_mutations)
        plans = moves(plan_mutations, ctx.profile) if launch else []
        plans += moves(vectorize_mutations)  # loops: R rows per step
        if launch:  # mtia whole-kernel rewrites: convolutions as row tiles, GEMM stores overlapped
            plans += moves(conv_mutations) + moves(stationary_mutations)
            plans += moves(gemm_plan_mutations) + moves(linear_mutations)
            plans += moves(m_halves_mutations)  # a one-wave GEMM's store behind its last dot
            plans += moves(wave_tile_mutations, ctx.profile)  # tiles that fill every wave of PEs
        if ctx.problem.target == "nvidia":  # whole-kernel rewrites and config sweeps (Hopper)
            plans += moves(gpu_mutations)
        # launch block sizes go through `blocks`, which keeps the grid consistent (or refuses)
        knobs = [m for m in knobs if _block_site(m) not in sites]
        found = recipes + knobs + blocks + plans
        if ctx.problem.target in TF32_DEFAULT_TARGETS and (
            states_exact_dots(code) or _computes_in_float32(ctx.problem.path)
        ):
            found = [dataclasses.replace(m, apply=_with_exact_dots(m.apply)) for m in found]
        return found

    def score(self, m: Mutation, diag: Diagnosis) -> float:
        s = m.prior + (self.diagnosis_term(m, diag) if self.use_diagnosis else 0.0)
        g = self.gains.get(m.family)
        if g:
            s += max(-1.0, min(1.0, sum(g) / len(g)))
        else:
            s += UNTRIED_BONUS  # curiosity: learn what every family is worth
        return s + 0.4 * self.rng.random()

    @staticmethod
    def diagnosis_term(m: Mutation, diag: Diagnosis) -> float:
        """How well the mutation's remedies answer the diagnosis (negative when it works against it)."""
        w, against = diag.weights(), diag.cost_weights()
        if not w and not against:
            return 0.0
        term = sum(w.get(r, 0.0) for r in m.remedies) - sum(against.get(r, 0.0) for r in m.costs)
        focus = diag.bottleneck.kernel if diag.bottleneck is not None else ""
        if focus and m.kernel and m.kernel != focus:
            term *= OTHER_KERNEL
        return max(-DIAGNOSIS_CAP, min(DIAGNOSIS_CAP, term))

    def propose(self, ctx: OperatorContext) -> Proposal:
        if not ctx.parent_code.strip():
            return Proposal(
                None, "offline: the parent has no code", self.name, error="no parent code", verdict="no_code"
            )
        if ctx.phase == "debug":
            return Proposal(
                None,
                "offline: cannot repair a failed candidate",
                self.name,
                verdict="no_code",
                error="the offline operator mutates correct candidates; it does not debug",
            )
        tried = {a.description for a in ctx.siblings}
        lineage = _lineage(ctx)
        muts = sorted(
            self.candidates(ctx),
            key=lambda m: (not self.transplants(m, lineage), -self.score(m, ctx.diagnosis)),
        )
        for m in muts:
            if m.description in tried:
                continue
            code = self._apply(m, ctx.parent_code, ctx.known_hashes)
            if code is not None:
                return Proposal(code, m.description, self.name, meta={"mutation": m.name, "family": m.family})
        for _ in range(24):  # every single step is known: try two at once
            if len(muts) < 2:
                break
            a, b = self.rng.sample(muts, 2)
            mid = self._apply(a, ctx.parent_code, frozenset())
            code = self._apply(b, mid, ctx.known_hashes) if mid else None
            if code is not None:
                return Proposal(
                    code,
                    f"{a.description}; {b.description}",
                    self.name,
                    meta={"mutation": f"{a.name}+{b.name}", "family": a.family, "pair": True},
                )
        return Proposal(
            None,
            "offline: no untried mutation of this node",
            self.name,
            verdict="no_code",
            error="every mutation of this node is already in the tree",
            meta={"exhausted": True},
        )

    @staticmethod
    def _apply(m: Mutation, source: str, known: frozenset[str]) -> str | None:
        try:
            code = m.apply(source)
            ast.parse(code)
        except (MutationError, SyntaxError, ValueError, KeyError):
            return None
        except Exception as exc:  # noqa: BLE001 - a defective move is skipped, the search goes on
            _warn_once(m.name, exc)
            return None
        if code_hash(code) in known or code_hash(code) == code_hash(source):
            return None
        return code

    def transplants(self, m: Mutation, lineage: set[str]) -> bool:
        """Whether the same change made another node faster and this node's lineage lacks it."""
        return m.description not in lineage and self.wins.get(m.description, 0.0) >= TRANSPLANT_MIN_GAIN

    def observe(self, proposal: Proposal, parent_fitness: float, fitness: float) -> None:
        family = proposal.meta.get("family")
        if family and parent_fitness > 0:
            gain = fitness / parent_fitness - 1.0
            self.gains[family].append(gain)
            # keyed by the description, which names the concrete change (a plan move's name does not:
            # "tile <= 256" re-tiles a seed but only sets stages on a kernel already tiled)
            if proposal.meta.get("mutation") and not proposal.meta.get("pair"):  # pairs: not as a unit
                key = proposal.description
                self.wins[key] = max(self.wins.get(key, gain), gain)


_WARNED: set[str] = set()


def _warn_once(move: str, exc: Exception) -> None:
    """Log a move that broke on a source (once per move and error type in this process)."""
    key = f"{move}:{type(exc).__name__}"
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning("offline move %s failed and was skipped (%s: %s); please report it", move,
                    type(exc).__name__, exc)


def _lineage(ctx: OperatorContext) -> set[str]:
    """The single moves that made the parent: its description and its ancestors', pairs split."""
    descriptions = [ctx.parent.description or ""] + [a.description for a in ctx.ancestors]
    return {part for d in descriptions for part in d.split("; ") if part}


def _with_exact_dots(apply: Callable[[str], str]) -> Callable[[str], str]:
    """`apply` whose result states exact float32 dots (D78): on a float32 problem, or below a parent
    that states them, a move that writes a kernel from a template's text (the embedding bags', a GEMM
    plan's) would otherwise get the GPU's TF32 default."""

    def exact(source: str) -> str:
        return exact_dots(apply(source))

    return exact


@functools.lru_cache(maxsize=64)
def _computes_in_float32(problem: Path | None) -> bool:
    return problem is not None and computes_in_float32(problem)
