"""GPU backend: the blocked mixing method (see blocked.py) with Triton in-block kernels.

cuBLAS does the block GEMMs for the whole batch; these kernels run the sequential part of each
block, one program per sample, the k coordinates of a vector across the program's lanes.
Tested on CPU with TRITON_INTERPRET=1 against the reference (tests/test_satnet.py).
"""
from __future__ import annotations

import triton
import triton.language as tl

from . import blocked

TINY = tl.constexpr(1e-12)


@triton.jit
def _forward_block(G, Cb, V, free, active, gnrm, delta, dV, start, b, B,
                   k: tl.constexpr, BK: tl.constexpr):
    s = tl.program_id(0)
    lanes = tl.arange(0, BK)
    mask = lanes < k
    is_active = tl.load(active + s) != 0
    decrease = tl.load(delta + s)  # accumulated in delta's dtype (float32 or float64)
    for q in range(b):
        row = ((start + q) * B + s) * k + lanes
        v_old = tl.load(V + row, mask=mask, other=0.0)
        g = tl.load(G + (q * B + s) * k + lanes, mask=mask, other=0.0)
        g -= tl.load(Cb + q * b + q) * v_old
        for p in range(q):
            g += tl.load(Cb + q * b + p) * tl.load(dV + (p * B + s) * k + lanes, mask=mask,
                                                   other=0.0)
        g_norm = tl.sqrt(tl.sum(g * g, axis=0))
        update = is_active & (tl.load(free + (start + q) * B + s) != 0) & (g_norm > TINY)
        v_new = tl.where(update, -g / tl.maximum(g_norm, TINY), v_old)
        dv = v_new - v_old
        tl.store(dV + (q * B + s) * k + lanes, dv, mask=mask)
        tl.store(V + row, v_new, mask=mask)
        old = tl.load(gnrm + (start + q) * B + s)
        tl.store(gnrm + (start + q) * B + s, tl.where(update, g_norm, old))
        decrease += tl.where(update, g_norm * tl.sum(dv * dv, axis=0), 0.0)
        tl.debug_barrier()
    tl.store(delta + s, decrease)


@triton.jit
def _backward_block(H, Cb, V, U, free, active, gnrm, a, dU, prox_lam, start, b, B,
                    k: tl.constexpr, BK: tl.constexpr):
    s = tl.program_id(0)
    lanes = tl.arange(0, BK)
    mask = lanes < k
    is_active = tl.load(active + s) != 0
    for q in range(b):
        row = ((start + q) * B + s) * k + lanes
        u_old = tl.load(U + row, mask=mask, other=0.0)
        v = tl.load(V + row, mask=mask, other=0.0)
        h = tl.load(H + (q * B + s) * k + lanes, mask=mask, other=0.0)
        h -= tl.load(Cb + q * b + q) * u_old
        for p in range(q):
            h += tl.load(Cb + q * b + p) * tl.load(dU + (p * B + s) * k + lanes, mask=mask,
                                                   other=0.0)
        h -= tl.sum(h * v, axis=0) * v
        denom = tl.load(gnrm + (start + q) * B + s) + tl.load(prox_lam)
        update = is_active & (tl.load(free + (start + q) * B + s) != 0)
        u_new = tl.where(update, (tl.load(a + row, mask=mask, other=0.0) - h) / denom, u_old)
        tl.store(dU + (q * B + s) * k + lanes, u_new - u_old, mask=mask)
        tl.store(U + row, u_new, mask=mask)
        tl.debug_barrier()


def _forward_kernel(G, Cb, start, V, free, active, gnrm, delta, dV):
    b, B, k = G.shape
    _forward_block[(B,)](G, Cb.contiguous(), V, free, active, gnrm, delta, dV, start, b, B,
                         k=k, BK=triton.next_power_of_2(k))


def _backward_kernel(H, Cb, start, V, U, free, active, gnrm, a, prox_lam, dU):
    b, B, k = H.shape
    _backward_block[(B,)](H, Cb.contiguous(), V, U, free, active, gnrm, a, dU, prox_lam, start,
                          b, B, k=k, BK=triton.next_power_of_2(k))


def mix_forward(C, V, free, order, max_iter, eps):
    return blocked.mix_forward(C, V, free, order, max_iter, eps, _forward_kernel)


def mix_backward(C, V, gnrm, free, order, iters, prox_lam, a):
    return blocked.mix_backward(C, V, gnrm, free, order, iters, prox_lam, a, _backward_kernel)
