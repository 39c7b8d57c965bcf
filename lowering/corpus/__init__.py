"""The kernel corpus: ``@triton.jit`` kernels with signatures, constexprs, PyTorch references and inputs.

    from lowering.corpus import CORPUS, get_entry
    entry = get_entry("matmul_k_loop")
    module = entry.module()          # TTIR through Triton's frontend → tile IR
    entry.check(seed=0)              # launch (on whatever backend Triton has active) and compare

`CORPUS` is ordered by theme (elementwise, norms, matmul/attention, conv, gathers, scans/shapes, atomics).
Shapes are small on purpose: the whole corpus compiles in a few seconds and runs on a simulator.
"""

from __future__ import annotations

from lowering.corpus import atomics, conv, elementwise, gathers, matmul, norms, scans
from lowering.corpus.entry import Args, CorpusEntry

__all__ = ["CORPUS", "CorpusEntry", "Args", "get_entry", "entry_names"]

CORPUS: dict[str, CorpusEntry] = {}
for _module in (elementwise, norms, matmul, conv, gathers, scans, atomics):
    for _entry in _module.ENTRIES:
        if _entry.name in CORPUS:
            raise RuntimeError(f"duplicate corpus entry {_entry.name}")
        CORPUS[_entry.name] = _entry


def get_entry(name: str) -> CorpusEntry:
    """The corpus entry `name` (KeyError listing the known names otherwise)."""
    try:
        return CORPUS[name]
    except KeyError:
        raise KeyError(f"no corpus kernel {name!r}; known: {', '.join(CORPUS)}") from None


def entry_names() -> list[str]:
    return list(CORPUS)
