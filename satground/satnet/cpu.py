"""CPU backend: the blocked mixing method (see blocked.py) with numba in-block kernels.

torch's BLAS does the block GEMMs on all cores; these kernels run the short sequential part of
each block (a few percent of the arithmetic). They are serial on purpose: a numba parallel
region launched between two multithreaded BLAS calls fights torch's OpenMP threads for the
cores and ran 30x slower here. Why numba rather than a C++ extension: it compiles plain
Python loops at first use (cached on disk afterwards), needs no toolchain at install time, and
the loops stay readable next to the reference.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import blocked

TINY = 1e-12


@njit(cache=True, error_model="numpy")
def _forward_block(G, Cb, start, V, free, active, gnrm, delta, dV):
    b, B, k = G.shape
    for s in range(B):
        if not active[s]:
            continue
        g = np.empty(k, dtype=G.dtype)
        for q in range(b):
            i = start + q
            for c in range(k):
                dV[q, s, c] = 0.0
            if not free[i, s]:
                continue
            cqq = Cb[q, q]
            for c in range(k):
                g[c] = G[q, s, c] - cqq * V[i, s, c]
            for p in range(q):
                cqp = Cb[q, p]
                for c in range(k):
                    g[c] += cqp * dV[p, s, c]
            gn2 = 0.0
            for c in range(k):
                gn2 += g[c] * g[c]
            gn = math.sqrt(gn2)
            if gn <= TINY:
                continue
            d2 = 0.0
            for c in range(k):
                v_new = -g[c] / gn
                dv = v_new - V[i, s, c]
                dV[q, s, c] = dv
                d2 += dv * dv
                V[i, s, c] = v_new
            gnrm[i, s] = gn
            delta[s] += gn * d2


@njit(cache=True, error_model="numpy")
def _backward_block(H, Cb, start, V, U, free, active, gnrm, a, prox_lam, dU):
    b, B, k = H.shape
    for s in range(B):
        if not active[s]:
            continue
        h = np.empty(k, dtype=H.dtype)
        for q in range(b):
            i = start + q
            for c in range(k):
                dU[q, s, c] = 0.0
            if not free[i, s]:
                continue
            cqq = Cb[q, q]
            for c in range(k):
                h[c] = H[q, s, c] - cqq * U[i, s, c]
            for p in range(q):
                cqp = Cb[q, p]
                for c in range(k):
                    h[c] += cqp * dU[p, s, c]
            hv = 0.0
            for c in range(k):
                hv += h[c] * V[i, s, c]
            inv = 1.0 / (gnrm[i, s] + prox_lam)
            for c in range(k):
                u_new = (a[i, s, c] - (h[c] - hv * V[i, s, c])) * inv
                dU[q, s, c] = u_new - U[i, s, c]
                U[i, s, c] = u_new


def _forward_kernel(G, Cb, start, V, free, active, gnrm, delta, dV):
    _forward_block(G.numpy(), Cb.contiguous().numpy(), start, V.numpy(), free.numpy(),
                   active.numpy(), gnrm.numpy(), delta.numpy(), dV.numpy())


def _backward_kernel(H, Cb, start, V, U, free, active, gnrm, a, prox_lam, dU):
    _backward_block(H.numpy(), Cb.contiguous().numpy(), start, V.numpy(), U.numpy(),
                    free.numpy(), active.numpy(), gnrm.numpy(), a.numpy(), prox_lam, dU.numpy())


def mix_forward(S, V, free, order, max_iter, eps):
    return blocked.mix_forward(S, V, free, order, max_iter, eps, _forward_kernel)


def mix_backward(S, V, gnrm, free, order, iters, prox_lam, a):
    return blocked.mix_backward(S, V, gnrm, free, order, iters, prox_lam, a, _backward_kernel)
