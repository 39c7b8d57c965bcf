"""Whole-kernel moves for the memory-bound production ops on mtia (issue 26), each read from the
diagnosis of the form it rewrites:

- `embedding`: a bag-per-program embedding bag becomes the segment gather (several bags per
  program, one DMA gather across bags, membership matmul in fp32); the bag-group moves after it, and
  the balanced form (one program per core, bags shared out by index count).
- `attention`: the online-softmax loop with the scale folded into Q, exp2, the key mask only for
  ragged sequences; `attention_pipeline`: the next key block's scores computed before this block's
  softmax; `attention_persist`: one program per PE walking its (query block, head) tiles, the next
  tile's loads carried.
- `segments`: one program per segment becomes one program per PE walking a run of segments balanced
  by their rows.
- `norms`: row kernels take several rows per program in a pipelined loop, row-invariant loads hoisted.
"""

from kegen.search.operators.mutations.memory.attention import attention_mutations
from kegen.search.operators.mutations.memory.attention_persist import attention_persist_mutations
from kegen.search.operators.mutations.memory.attention_pipeline import attention_pipeline_mutations
from kegen.search.operators.mutations.memory.attention_plan import attention_plan_mutations
from kegen.search.operators.mutations.memory.attention_rescale import attention_rescale_mutations
from kegen.search.operators.mutations.memory.embedding import balance_mutations, embedding_mutations
from kegen.search.operators.mutations.memory.norms import norm_mutations
from kegen.search.operators.mutations.memory.segments import segment_balance_mutations

__all__ = [
    "attention_mutations",
    "attention_persist_mutations",
    "attention_pipeline_mutations",
    "attention_plan_mutations",
    "attention_rescale_mutations",
    "balance_mutations",
    "embedding_mutations",
    "norm_mutations",
    "segment_balance_mutations",
]
