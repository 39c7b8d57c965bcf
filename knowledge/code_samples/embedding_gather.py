"""Embedding lookup: gather whole rows of a table by index (the indirect-access pattern).

Each program loads a block of indices once, then gathers a `[ROWS, BLOCK_D]` tile: only the
row starts are data-dependent, every row itself is contiguous. On MTIA the index load is a block
DMA and the row gather is one `DMA_GATHER` of `GatherForm.ROWS` (one address per row, each row
read as a contiguous run; the row and column masks become a per-row mask and a column bound).
Indices are assumed valid, as `torch.nn.functional.embedding` requires.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def embedding_kernel(idx_ptr, table_ptr, out_ptr, n_idx, dim, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_idx
    idx = tl.load(idx_ptr + rows, mask=row_mask, other=0)
    for d in range(0, dim, BLOCK_D):
        cols = d + tl.arange(0, BLOCK_D)
        mask = row_mask[:, None] & (cols[None, :] < dim)
        vals = tl.load(table_ptr + idx[:, None] * dim + cols[None, :], mask=mask, other=0.0)
        tl.store(out_ptr + rows[:, None] * dim + cols[None, :], vals, mask=mask)


def embedding(idx: torch.Tensor, table: torch.Tensor, rows: int = 16, block_d: int = 64) -> torch.Tensor:
    flat = idx.reshape(-1).contiguous()
    n, dim = flat.numel(), table.shape[1]
    out = torch.empty((n, dim), dtype=table.dtype)
    embedding_kernel[(triton.cdiv(n, rows),)](flat, table, out, n, dim, ROWS=rows, BLOCK_D=block_d)
    return out.reshape(*idx.shape, dim)


class Model(torch.nn.Module):
    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(num_embeddings, dim))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(idx, self.table)


class ModelNew(Model):
    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return embedding(idx, self.table.detach())


def get_inputs():
    return [torch.randint(0, 500, (5, 9))]


def get_init_inputs():
    return [500, 96]
