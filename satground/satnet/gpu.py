"""GPU backend: the blocked mixing method (see blocked.py) with Triton in-block kernels.

cuBLAS does the block GEMMs for the whole batch; these kernels run the sequential part of each
block, one program per sample, the k coordinates of a vector across the program's lanes. The
diagonal block of C is read in place (its row stride passed), so no block is copied.
Tested on CPU with TRITON_INTERPRET=1 against the reference (tests/test_satnet.py).
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import blocked

TINY = tl.constexpr(1e-12)


@triton.jit
def _forward_block(G, Cb, ldc, V, free, active, gnrm, delta, start, b, B,
                   k: tl.constexpr, BK: tl.constexpr, BB: tl.constexpr):
    s = tl.program_id(0)
    lanes = tl.arange(0, BK)
    mask = lanes < k
    rows = tl.arange(0, BB)
    is_active = tl.load(active + s) != 0
    decrease = tl.load(delta + s)  # accumulated in delta's dtype (float32 or float64)
    # the block's changes so far, one row per variable, held in registers: the correction of
    # g_q for the earlier updates is then one (BB x BK) product and sum, not q serial loads
    dV = tl.zeros((BB, BK), dtype=decrease.dtype)
    for q in range(b):
        row = ((start + q) * B + s) * k + lanes
        v_old = tl.load(V + row, mask=mask, other=0.0)
        g = tl.load(G + (q * B + s) * k + lanes, mask=mask, other=0.0)
        c_q = tl.load(Cb + q * ldc + rows, mask=rows < q, other=0.0)
        g += tl.sum(c_q[:, None] * dV, axis=0) - tl.load(Cb + q * ldc + q) * v_old
        g_norm = tl.sqrt(tl.sum(g * g, axis=0))
        update = is_active & (tl.load(free + (start + q) * B + s) != 0) & (g_norm > TINY)
        v_new = tl.where(update, -g / tl.maximum(g_norm, TINY), v_old)
        dv = v_new - v_old
        dV = tl.where(rows[:, None] == q, dv[None, :], dV)
        tl.store(V + row, v_new, mask=mask)
        old = tl.load(gnrm + (start + q) * B + s)
        tl.store(gnrm + (start + q) * B + s, tl.where(update, g_norm, old))
        decrease += tl.where(update, g_norm * tl.sum(dv * dv, axis=0), 0.0)
    tl.store(delta + s, decrease)


@triton.jit
def _backward_block(H, Cb, ldc, V, U, free, active, gnrm, a, prox_lam, start, b, B,
                    k: tl.constexpr, BK: tl.constexpr, BB: tl.constexpr):
    s = tl.program_id(0)
    lanes = tl.arange(0, BK)
    mask = lanes < k
    rows = tl.arange(0, BB)
    is_active = tl.load(active + s) != 0
    prox = tl.load(prox_lam)
    dU = tl.zeros((BB, BK), dtype=prox.dtype)  # as dV in the forward
    for q in range(b):
        row = ((start + q) * B + s) * k + lanes
        u_old = tl.load(U + row, mask=mask, other=0.0)
        v = tl.load(V + row, mask=mask, other=0.0)
        h = tl.load(H + (q * B + s) * k + lanes, mask=mask, other=0.0)
        c_q = tl.load(Cb + q * ldc + rows, mask=rows < q, other=0.0)
        h += tl.sum(c_q[:, None] * dU, axis=0) - tl.load(Cb + q * ldc + q) * u_old
        h -= tl.sum(h * v, axis=0) * v
        denom = tl.load(gnrm + (start + q) * B + s) + prox
        update = is_active & (tl.load(free + (start + q) * B + s) != 0)
        u_new = tl.where(update, (tl.load(a + row, mask=mask, other=0.0) - h) / denom, u_old)
        dU = tl.where(rows[:, None] == q, (u_new - u_old)[None, :], dU)
        tl.store(U + row, u_new, mask=mask)


def _forward_kernel(G, Cb, start, V, free, active, gnrm, delta):
    b, B, k = G.shape
    _forward_block[(B,)](G, Cb, Cb.stride(0), V, free, active, gnrm, delta, start, b, B,
                         k=k, BK=triton.next_power_of_2(k), BB=blocked.BLOCK)


def _backward_kernel(H, Cb, start, V, U, free, active, gnrm, a, prox_lam):
    b, B, k = H.shape
    _backward_block[(B,)](H, Cb, Cb.stride(0), V, U, free, active, gnrm, a, prox_lam, start,
                          b, B, k=k, BK=triton.next_power_of_2(k), BB=blocked.BLOCK)


def mix_forward(C, V, free, order, max_iter, eps):
    return blocked.mix_forward(C, V, free, order, max_iter, eps, _forward_kernel)


def mix_backward(C, V, gnrm, free, order, iters, prox_lam, a):
    return blocked.mix_backward(C, V, gnrm, free, order, iters, prox_lam, a, _backward_kernel)
