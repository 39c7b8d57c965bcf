"""Every kernel of the frontend corpus either runs on the simulated chip through
kernel[grid](...) and matches PyTorch, or fails with a clear error naming the kernel and op."""

from __future__ import annotations

import pytest
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from lowering.codegen.errors import LoweringError
from lowering.corpus import CORPUS

# kernel -> a fragment of the error it must fail with (what the MTIA model cannot express yet)
EXPECTED_ERRORS: dict[str, str] = {
    "associative_scan_recurrence": "combine function",  # a 2-operand custom scan (linear recurrence)
}

RUNNABLE = [n for n in CORPUS if n not in EXPECTED_ERRORS]


@pytest.mark.parametrize("name", RUNNABLE)
def test_corpus_kernel_matches_pytorch(name: str) -> None:
    entry = CORPUS[name]
    entry.check(seed=0)
    entry.check(seed=1)


@pytest.mark.parametrize("name", sorted(EXPECTED_ERRORS))
def test_corpus_kernel_fails_clearly(name: str) -> None:
    if name not in CORPUS:
        pytest.skip(f"{name} is no longer in the corpus")
    entry = CORPUS[name]
    sig = {n: ("constexpr" if n in entry.constexprs else entry.signature[n]) for n in entry.fn.arg_names}
    with pytest.raises(LoweringError) as info:
        triton.compile(ASTSource(entry.fn, sig, dict(entry.constexprs)), target=GPUTarget("mtia", "2i", 1))
    msg = str(info.value)
    assert EXPECTED_ERRORS[name] in msg
    assert f"kernel {entry.fn.__name__}" in msg and " at " in msg  # names the kernel and the source line


def test_corpus_count() -> None:
    """The count reported to the team: how much of the corpus the MTIA model runs."""
    runnable = len(RUNNABLE)
    assert runnable >= 0.8 * len(CORPUS), f"only {runnable}/{len(CORPUS)} corpus kernels run on mtia"
