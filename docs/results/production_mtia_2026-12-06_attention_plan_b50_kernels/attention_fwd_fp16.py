"""Seed: flash-attention style online softmax; 64 queries per program, keys in blocks of 64, no pipelining."""
import math
import torch
import torch.nn as nn
import triton
import triton.language as tl
KEY_BLOCK = 64
PERSIST_PROGRAMS = 64

@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq, head_dim, scale, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, persist_g0, persist_g1, EVEN_N: tl.constexpr):
    persist_pid = tl.program_id(0)
    persist_nprog = tl.num_programs(0)
    persist_tiles = persist_g0 * persist_g1
    q_tile = tl.load(q_ptr + persist_pid // persist_g0 * seq * head_dim + (persist_pid % persist_g0 * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * head_dim + tl.arange(0, BLOCK_D)[None, :], mask=((persist_pid % persist_g0 * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < seq) & (tl.arange(0, BLOCK_D) < head_dim)[None, :] & (persist_pid < persist_tiles), other=0.0)
    for persist_tile in range(persist_pid, persist_tiles, persist_nprog):
        pid_m = persist_tile % persist_g0
        bh = persist_tile // persist_g0
        base = bh * seq * head_dim
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        dmask = offs_d < head_dim
        q = q_tile
        q = (q.to(tl.float32) * (scale * 1.4426950408889634)).to(q.dtype)
        m_i = tl.full((BLOCK_M,), float('-inf'), dtype=tl.float32)
        l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
        acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
        start_last = 0 + (seq - 1 - 0) // BLOCK_N * BLOCK_N
        keys_first = 0 + offs_n
        kt_first = tl.load(k_ptr + base + keys_first[None, :] * head_dim + offs_d[:, None], mask=(keys_first[None, :] < seq) & dmask[:, None], other=0.0)
        s_dot = tl.dot(q, kt_first)
        persist_next = persist_tile + persist_nprog
        q_next_tile = tl.load(q_ptr + persist_next // persist_g0 * seq * head_dim + (persist_next % persist_g0 * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] * head_dim + tl.arange(0, BLOCK_D)[None, :], mask=((persist_next % persist_g0 * BLOCK_M + tl.arange(0, BLOCK_M))[:, None] < seq) & (tl.arange(0, BLOCK_D) < head_dim)[None, :] & (persist_next < persist_tiles), other=0.0)
        m_i_fix = tl.max(s_dot, axis=1)
        kegen_negm = tl.zeros_like(s_dot) - m_i_fix[:, None]
        s_dot = s_dot + kegen_negm
        kegen_over = tl.zeros_like(m_i_fix) - float('inf')
        for start in range(0, seq, BLOCK_N):
            start_next = tl.minimum(start + BLOCK_N, start_last)
            keys_next = start_next + offs_n
            kt_next = tl.load(k_ptr + base + keys_next[None, :] * head_dim + offs_d[:, None], mask=(keys_next[None, :] < seq) & dmask[:, None], other=0.0)
            s_dot_next = tl.dot(q, kt_next, kegen_negm)
            keys = start + offs_n
            s = s_dot
            if not EVEN_N:
                s = tl.where(keys[None, :] < seq, s, float('-inf'))
            kegen_rowmax = tl.max(s, axis=1)
            v = tl.load(v_ptr + base + keys[:, None] * head_dim + offs_d[None, :], mask=(keys[:, None] < seq) & dmask[None, :], other=0.0)
            p = tl.exp2(s).to(v.dtype)
            l_i = l_i + tl.sum(p.to(tl.float32), axis=1)
            acc = tl.dot(p, v, acc)
            s_dot = s_dot_next
            kegen_over = tl.maximum(kegen_over, kegen_rowmax)
        m_i = m_i_fix
        if tl.max(tl.maximum(kegen_over - 8.0, -2.0 - kegen_over), axis=0) > 0.0:
            m_i = tl.full((BLOCK_M,), float('-inf'), dtype=tl.float32)
            l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
            acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
            s_dot = tl.dot(q, kt_first)
            for start in range(0, seq, BLOCK_N):
                start_next = tl.minimum(start + BLOCK_N, start_last)
                keys_next = start_next + offs_n
                kt_next = tl.load(k_ptr + base + keys_next[None, :] * head_dim + offs_d[:, None], mask=(keys_next[None, :] < seq) & dmask[:, None], other=0.0)
                s_dot_next = tl.dot(q, kt_next)
                keys = start + offs_n
                s = s_dot
                if not EVEN_N:
                    s = tl.where(keys[None, :] < seq, s, float('-inf'))
                m_new = tl.maximum(m_i, tl.max(s, axis=1))
                p = tl.exp2(s - m_new[:, None])
                alpha = tl.exp2(m_i - m_new)
                l_i = l_i * alpha + tl.sum(p, axis=1)
                v = tl.load(v_ptr + base + keys[:, None] * head_dim + offs_d[None, :], mask=(keys[:, None] < seq) & dmask[None, :], other=0.0)
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
                m_i = m_new
                s_dot = s_dot_next
        acc = acc * (1.0 / l_i)[:, None]
        tl.store(o_ptr + base + offs_m[:, None] * head_dim + offs_d[None, :], acc.to(o_ptr.dtype.element_ty), mask=(offs_m[:, None] < seq) & dmask[None, :])
        q_tile = q_next_tile

class ModelNew(nn.Module):

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        q, k, v = (q.contiguous(), k.contiguous(), v.contiguous())
        batch, heads, seq, head_dim = q.shape
        o = torch.empty_like(q)
        grid = (triton.cdiv(seq, 64), batch * heads)
        persist_grid = grid
        attention_kernel[min(2 * PERSIST_PROGRAMS, persist_grid[0] * persist_grid[1]),](q, k, v, o, seq, head_dim, 1.0 / math.sqrt(head_dim), BLOCK_D=triton.next_power_of_2(head_dim), BLOCK_M=64, BLOCK_N=KEY_BLOCK, dual_core=True, persist_g0=persist_grid[0], persist_g1=persist_grid[1], EVEN_N=seq % KEY_BLOCK == 0)
        return o
