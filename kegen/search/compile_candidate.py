"""torch.compile's own kernels as a candidate of every search on a GPU target (issue 26).

`start_run` calls `add_compile_candidate` once a run's root exists: on nvidia (and amd) the GPU draft
of the problem (kegen.inductor.gpu_draft: Inductor's Triton kernels with the configs its autotuning
chose on this GPU) becomes a child of the root with operator "compile", evaluated like every other
candidate, so a search never ends slower than that code. Where it cannot be drafted here (no GPU in
the search's process, a library op without a Triton form) the run goes on without it and the root's
node records why in the run's artifacts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

OPERATOR = "compile"
TARGETS = ("nvidia", "amd")
DESCRIPTION = "torch.compile's own kernels (Inductor's Triton code and autotuned launch configs on this GPU)"

# how a GPU draft's source begins (kegen.inductor.gpu_draft.HEADER): such a seed is compile's code already
GPU_DRAFT_MARK = re.compile(r'"""Drafted by kegen from TorchInductor\'s output for \S+ on (nvidia|amd):')
# (problem path, target) -> candidate source; raises when the problem cannot be drafted
Drafter = Callable[[Path, str], str]


def gpu_drafter(problem_path: Path, target: str) -> str:
    """The GPU draft of `problem_path` (kegen.inductor.gpu_draft). A reference that upcasts fp16/bf16
    operands with `.float()` (exact on a CPU host) is drafted in its operands' native dtype, as
    torch.compile runs the model it stands for (`kegen.bench.native_dtype`), where that keeps the
    outputs' dtypes; otherwise as written."""
    from kegen.bench.native_dtype import native_float, native_keeps_dtypes, reference_upcasts
    from kegen.inductor.gpu_draft import draft_for_gpu

    if reference_upcasts(problem_path) and native_keeps_dtypes(problem_path):
        with native_float():
            source, _ = draft_for_gpu(problem_path, target)
        return source
    source, _ = draft_for_gpu(problem_path, target)
    return source


def add_compile_candidate(
    store: Any,
    run_id: str,
    root_id: int,
    problem_path: Path,
    target: str,
    existing: set[str],
    drafter: Drafter | None = None,
    seed_code: str = "",
) -> int | None:
    """Add torch.compile's code as a child of the root on GPU targets; the node's id, or None (not a
    GPU target, the seed is already a GPU draft (`kegen tune` seeds with one), the code equals a node
    already there (`existing` code hashes), or no draft here: the reason is stored as the run's
    `compile_candidate` artifact)."""
    from kegen.search.store import code_hash

    if target not in TARGETS or GPU_DRAFT_MARK.match(seed_code):
        return None
    try:
        source = (drafter or gpu_drafter)(Path(problem_path), target)
    except Exception as exc:  # the search goes on without it; the artifact says why
        store.add_artifact(
            run_id, None, "compile_candidate", content=f"not added: {type(exc).__name__}: {exc}"[:2000]
        )
        return None
    if code_hash(source) in existing:
        return None
    return int(
        store.add_node(
            run_id, parent_id=root_id, code=source, operator=OPERATOR, description=DESCRIPTION, target=target
        )
    )


def compile_candidate_won(store: Any, run_id: str, best_id: int | None) -> bool:
    """Whether the run's best node is the compile candidate itself."""
    if best_id is None:
        return False
    node = store.node(best_id)
    return node is not None and node.operator == OPERATOR
