"""Attention: the whole mtia plan in one move (persistent tiles, scores a block ahead, exp2, the softmax on a
fixed reference), each step taken where it applies.

The attention moves compose (`tile_scope`), but a search reaches their composition one evaluation
per step and spends its budget on the orders and the other moves in between: the budget-50 search
of the production attention reached the persistent -> score-ahead -> exp2 kernel (72.5 us) at its
41st evaluation and never tried the fixed-reference softmax on it (62.3 us through a non-persistent
chain). Like the GEMM plan moves, this move writes the plan a kernel engineer would: starting from
any online-softmax kernel, `attention_persist` (128-query tiles, query blocks first or heads first;
the tile's query block kept where 128 does not apply), `attention_pipeline`, the exp2 rewrite
(`attention`) and `attention_rescale` (unrolled), skipping a step that does not apply (the kernel
already has it, or its form is not recognised). A variant without the persistent step serves
kernels it does not recognise, and a dual-core variant keeps the kernel's query block, runs two
programs per PE (one's softmax overlaps the other's loads) and one key block per iteration (the
unrolled form does not fit half a local store). Measured on the production seed (mtia-2i,
simulated): 131.5 -> 57.5 us dual core (64-query tiles, 71.2% of the roofline), 58.4 us with
128-query tiles query blocks first (70.2%), 61.1 us heads first; with 64-query tiles dual core the
unrolled form 58.6 us, heads first 64.5 us; 128-query tiles do not fit dual core.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError
from kegen.search.operators.mutations.knobs import apply_launch_options
from kegen.search.operators.mutations.memory import (
    attention,
    attention_persist,
    attention_pipeline,
    attention_rescale,
)

FAMILY = "attention_plan"
PRIOR = 2.6  # above every single attention move: it is their measured best composition
_PERSIST = {"qfirst": False, "heads": True, "dual": False}
_WHAT = {
    "qfirst": "persistent 128-query tiles, query blocks first",
    "heads": "persistent 128-query tiles, heads first",
    "dual": "persistent, its query tiles, query blocks first, two programs per PE (dual core)",
    None: "its grid kept",
}


def _try(step: Callable[[str], str], source: str) -> str:
    try:
        return step(source)
    except MutationError:
        return source


def plan(source: str, kernel: str, persist: str | None) -> str:
    """`source` with `kernel` through the plan's steps (module doc); `persist`: "qfirst", "heads", "dual"
    or None (no persistent step). MutationError where the fixed-reference softmax does not apply at the
    end."""
    src = source
    if persist == "dual":  # two programs per PE share its local store: the tile's own query block
        src = attention_persist.rewrite(apply_launch_options(src, {kernel: {"dual_core": True}}), kernel,
                                        heads_first=False)
    elif persist is not None:
        order = _PERSIST[persist]
        persistent = partial(attention_persist.rewrite, kernel=kernel, heads_first=order)
        wide = _try(partial(persistent, query_block=attention_persist.QUERY_BLOCK), src)
        src = wide if wide != src else _try(persistent, src)
        if src == source:
            raise MutationError(f"{kernel} has no 2-D grid online-softmax loop to make persistent")
    src = _try(partial(attention_pipeline.rewrite, kernel=kernel), src)
    src = _try(partial(attention.rewrite, kernel=kernel), src)
    return attention_rescale.rewrite(src, kernel, unroll=persist != "dual")


def attention_plan_mutations(source: str) -> list[Mutation]:
    """The whole plan, per online-softmax kernel of `source` it takes to the fixed-reference softmax."""
    out = []
    kernels = {m.kernel for m in attention_pipeline.attention_pipeline_mutations(source)}
    kernels |= {m.kernel for m in attention_rescale.attention_rescale_mutations(source)}
    for kernel in sorted(kernels):
        variants = (("dual", PRIOR), ("qfirst", PRIOR * 0.95), ("heads", PRIOR * 0.85), (None, PRIOR * 0.8))
        for persist, prior in variants:
            try:
                plan(source, kernel, persist)
            except (MutationError, SyntaxError):
                continue
            what = _WHAT[persist]
            out.append(
                Mutation(
                    name=f"attention_plan@{kernel}/{persist or 'grid'}",
                    family=FAMILY,
                    description=(
                        f"{kernel}: the whole attention plan ({what}; scores a block ahead; exp2 with the "
                        "scale in Q; the softmax on a fixed per-row reference"
                        + (")" if persist == "dual" else ", two key blocks per iteration)")
                    ),
                    apply=partial(plan, kernel=kernel, persist=persist),
                    helps=("compute", "latency"),
                    prior=prior,
                    remedies=("cheaper_math", "overlap", "balance"),
                    kernel=kernel,
                )
            )
    return out
