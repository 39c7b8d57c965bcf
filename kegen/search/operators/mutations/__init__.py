"""Source-to-source mutations of Triton candidates (AST rewrites), as a kernel engineer would try them.

- `knobs`: constexpr block sizes (module constants, launch keywords, constexpr defaults; the
  grid follows) and the mtia backend's launch options (every `lowering.pipeline.search_space()` option).
- `recipes`: algorithmic rewrites from the knowledge base (two-pass → online softmax, one block
  per row, grouped tile order for matmul).
- `vectorize`: scalar-step row loops strip-mined to R rows per step (one masked 2-D block).
- `rows`: one block per row for any row kernel whose chunked passes fit one block (`loads` then
  reads each repeated load once).
"""

from kegen.search.operators.mutations.base import Mutation, MutationError
from kegen.search.operators.mutations.knobs import Knob, find_knobs, knob_mutations, set_knob
from kegen.search.operators.mutations.recipes import recipe_mutations
from kegen.search.operators.mutations.vectorize import vectorize_mutations

__all__ = [
    "Knob",
    "Mutation",
    "MutationError",
    "find_knobs",
    "knob_mutations",
    "recipe_mutations",
    "set_knob",
    "vectorize_mutations",
]
