"""Memory layout the fast path's native code and Python share: the state words, plan keys,
relocation metadata, op records and queue rows (all int64 words), and an IR helper to load one.

Both the IR generators (`ir`, `ops_ir`) and the Python side (`doorbells`, `reloc`, `encode`) import
this module; it imports nothing of theirs.
"""

from __future__ import annotations

from mtia_sim import isa

# state words
(F_ENABLED, F_STACK_BASE, F_STACK_SIZE, F_STACK_HOST, F_PE, F_TABLE, F_MASK, F_KEYS, F_OPS, F_QUEUE,
 F_QCOUNT, F_QCAP, F_COUNT_PTR, F_ACCESS_PTR, F_UNUSED, F_HASH, F_BUDGET, F_META) = range(18)
STATE_WORDS = 20
KEY_WORDS = isa.DESC_WORDS + 1  # descriptor words (address words zeroed), then the PE
ADDR_FIRST, ADDR_LAST = int(isa.Field.DST), int(isa.Field.SRC2)  # the address words: dst, src0..src2
N_ADDR = ADDR_LAST - ADDR_FIRST + 1
DELTA_ALIGN = isa.ALIGNMENT  # a relocated operand moves by a multiple of this (keeps `misaligned`)
OPS_PER_PLAN = 2
OP_WORDS = 16
# per plan: address words at registration, min and max delta, group (first address word in the same
# memory: same delta required), local flags (the word addresses LOCAL_BASE: its host pointer also
# moves by (PE - plan's PE) * local-store stride), the plan's PE, that stride, then per op word the
# address word whose delta it takes (-1: none)
M_ADDR0, M_DMIN, M_DMAX, M_GROUP, M_LOCAL = 0, N_ADDR, 2 * N_ADDR, 3 * N_ADDR, 4 * N_ADDR
M_PE0, M_LSTRIDE, M_RELOC = 5 * N_ADDR, 5 * N_ADDR + 1, 5 * N_ADDR + 2
META_WORDS = M_RELOC + OPS_PER_PLAN * OP_WORDS
ANY_PE = -1  # key PE word of a plan that serves every PE
ROW_WORDS = 12  # plan (-1: a fence), pc, instruction count, 4 access-counter words, fence mask, 4 deltas
FENCE_ROW = -1
K_COPY, K_FILL, K_UFUNC = 1, 2, 3
HASH_MUL = 0x100000001B3
HASH_SEED = 0xCBF29CE484222325


def load_word(name: str, base: str, index: int) -> str:
    """IR loading word `index` of the i64 array at `base` into %name."""
    return (f"  %{name}.p = getelementptr i64, ptr {base}, i64 {index}\n"
            f"  %{name} = load i64, ptr %{name}.p\n")
