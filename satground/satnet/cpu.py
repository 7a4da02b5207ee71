"""CPU backend: one compiled pass per sample over its free variables only (numba).

Each update needs g_i = sum_{j != i} C_ij v_j with C = S S^T. A sample's fixed variables (truth,
given cells: about a third of a 9x9 board) never change, so their part of every g_i,
F_i = sum_{j fixed} C_ij v_j, is computed once (one GEMM for the batch); the sweeps then work on the sample's compact
free block Cf = C[free, free] and its free vectors only. At the 9x9 size that halves the
arithmetic of a batch-wide GEMM over all variables.

Within a sweep, rows are taken four at a time: the four g's are first computed from the vectors
as they stand (a 4x4-tiled dot-product kernel that keeps its 16 running sums in registers),
then each is corrected for the updates made just before it in the same group of four, exactly
as the sequential order requires. Variables are visited in the reference's order, so results
agree with it up to float rounding.

The batch is split over threads (`prange`), one whole sample per thread, inside a single
compiled call: no BLAS call runs in between, so numba's threads never fight torch's OpenMP pool
(switching between the two every block ran 30x slower here). Extra memory: one compact block per
thread (4 bytes x free^2, 2 MB at the 9x9 size), independent of the batch size.

Why numba rather than a C++ extension: it compiles at first use (cached on disk afterwards),
needs no toolchain at install time, and the loops stay readable next to the reference.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange

TINY = 1e-12
# reassociation lets the dot products vectorise; no assumption about NaN or inf is made, so a
# degenerate sample still shows up as non-finite and gets zero gradient
FASTMATH = {"contract", "reassoc", "nsz"}


@njit(inline="always", fastmath=FASTMATH)
def _dot4x4(A, r, Bt, c, n, zero):
    """The 16 dot products A[r+a, :n] . Bt[c+b, :n], a, b < 4, kept in registers."""
    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = zero
    s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = zero
    for j in range(n):
        a0 = A[r, j]
        a1 = A[r + 1, j]
        a2 = A[r + 2, j]
        a3 = A[r + 3, j]
        b0 = Bt[c, j]
        b1 = Bt[c + 1, j]
        b2 = Bt[c + 2, j]
        b3 = Bt[c + 3, j]
        s00 += a0 * b0
        s01 += a0 * b1
        s02 += a0 * b2
        s03 += a0 * b3
        s10 += a1 * b0
        s11 += a1 * b1
        s12 += a1 * b2
        s13 += a1 * b3
        s20 += a2 * b0
        s21 += a2 * b1
        s22 += a2 * b2
        s23 += a2 * b3
        s30 += a3 * b0
        s31 += a3 * b1
        s32 += a3 * b2
        s33 += a3 * b3
    return (s00, s01, s02, s03, s10, s11, s12, s13,
            s20, s21, s22, s23, s30, s31, s32, s33)


@njit(fastmath=FASTMATH)
def _rows_times(Cf, q0, rows, Xt, out, zero):
    """out[r, :] = Cf[q0 + r, :] @ X for r < rows, with X given transposed (k, nf)."""
    k, nf = Xt.shape
    if rows == 4:
        for c in range(0, k - 3, 4):
            t = _dot4x4(Cf, q0, Xt, c, nf, zero)
            for a in range(4):
                for b in range(4):
                    out[a, c + b] = t[4 * a + b]
        c0 = k - k % 4
    else:
        c0 = 0
    for r in range(rows):
        for c in range(c0, k):
            s = zero
            for j in range(nf):
                s += Cf[q0 + r, j] * Xt[c, j]
            out[r, c] = s


@njit(fastmath=FASTMATH)
def _compact(C, f):
    nf = f.shape[0]
    Cf = np.empty((nf, nf), dtype=C.dtype)
    for a in range(nf):
        for b in range(nf):
            Cf[a, b] = C[f[a], f[b]]
    return Cf


@njit(fastmath=FASTMATH)
def _sample_forward(Cf, F, V, max_iter, eps, gnrm, zero):
    """Mixing-method sweeps over one sample's free variables, in place on V (nf, k)."""
    nf, k = V.shape
    Vt = V.T.copy()  # (k, nf) for the dot-product kernel; V stays row-major for the updates
    g = np.empty((4, k), dtype=V.dtype)
    dv = np.empty((4, k), dtype=V.dtype)
    threshold = zero
    sweeps = 0
    for sweep in range(max_iter):
        delta = zero
        for q0 in range(0, nf, 4):
            rows = min(4, nf - q0)
            _rows_times(Cf, q0, rows, Vt, g, zero)
            for r in range(rows):
                q = q0 + r
                for c in range(k):
                    g[r, c] += F[q, c] - Cf[q, q] * V[q, c]
                    dv[r, c] = zero
                for p in range(r):  # updates made earlier in this group of four
                    cqp = Cf[q, q0 + p]
                    for c in range(k):
                        g[r, c] += cqp * dv[p, c]
                gn2 = zero
                for c in range(k):
                    gn2 += g[r, c] * g[r, c]
                gn = math.sqrt(gn2)
                if gn <= TINY:
                    continue
                d2 = zero
                for c in range(k):
                    v_new = -g[r, c] / gn
                    dv[r, c] = v_new - V[q, c]
                    d2 += dv[r, c] * dv[r, c]
                    V[q, c] = v_new
                    Vt[c, q] = v_new
                gnrm[q] = gn
                delta += gn * d2  # the objective's decrease from this update
        sweeps += 1
        if sweep == 0:
            threshold = eps * delta
        if delta < threshold:
            break
    return sweeps


@njit(fastmath=FASTMATH)
def _sample_backward(Cf, V, gnrm, a, U, sweeps, prox_lam, zero):
    """Gauss-Seidel sweeps of the backward system over one sample's free variables, in place
    on U (nf, k)."""
    nf, k = U.shape
    Ut = U.T.copy()
    h = np.empty((4, k), dtype=U.dtype)
    du = np.empty((4, k), dtype=U.dtype)
    for _ in range(sweeps):
        for q0 in range(0, nf, 4):
            rows = min(4, nf - q0)
            _rows_times(Cf, q0, rows, Ut, h, zero)
            for r in range(rows):
                q = q0 + r
                for c in range(k):
                    h[r, c] -= Cf[q, q] * U[q, c]
                for p in range(r):
                    cqp = Cf[q, q0 + p]
                    for c in range(k):
                        h[r, c] += cqp * du[p, c]
                hv = zero
                for c in range(k):
                    hv += h[r, c] * V[q, c]
                inv = 1.0 / (gnrm[q] + prox_lam)
                for c in range(k):
                    u_new = (a[q, c] - (h[r, c] - hv * V[q, c])) * inv
                    du[r, c] = u_new - U[q, c]
                    U[q, c] = u_new
                    Ut[c, q] = u_new


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(C, V, fixed_part, free, max_iter, eps, gnrm, iters, zero):
    for s in prange(V.shape[0]):
        f = np.nonzero(free[s])[0]  # this sample's free variables, in visiting order
        Vf, gf = V[s][f], np.zeros(f.shape[0], dtype=V.dtype)
        iters[s] = _sample_forward(_compact(C, f), fixed_part[s][f], Vf, max_iter, eps, gf, zero)
        V[s][f] = Vf
        gnrm[s][f] = gf


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(C, V, gnrm, free, a, iters, prox_lam, U, zero):
    for s in prange(V.shape[0]):
        f = np.nonzero(free[s])[0]
        Uf = np.zeros((f.shape[0], V.shape[2]), dtype=V.dtype)
        _sample_backward(_compact(C, f), V[s][f], gnrm[s][f], a[s][f], Uf, iters[s], prox_lam,
                         zero)
        U[s][f] = Uf


def _permute(order, *xs):
    return [x[:, order].contiguous() for x in xs]


def _unpermute(order, x):
    out = torch.empty_like(x)
    out[:, order] = x
    return out


def _gram(S, order):
    S = S.detach()[order]
    return (S @ S.T).contiguous()


def mix_forward(S, V, free, order, max_iter, eps):
    B, N, _ = V.shape
    Vp, freep = _permute(order, V, free)
    gnrm = torch.zeros(B, N, dtype=V.dtype)
    iters = torch.zeros(B, dtype=torch.long)
    C = _gram(S, order)
    # the fixed variables' share of every g_i, sum_{j fixed} C_ij v_j: one GEMM for the batch
    fixed_vectors = (Vp * ~freep[:, :, None]).transpose(0, 1).reshape(N, -1)
    fixed_part = (C @ fixed_vectors).view(N, B, -1).transpose(0, 1).contiguous()
    zero = np.zeros((), dtype=Vp.numpy().dtype)[()]
    _forward(C.numpy(), Vp.numpy(), fixed_part.numpy(), freep.numpy(), int(max_iter),
             zero + eps, gnrm.numpy(), iters.numpy(), zero)
    return _unpermute(order, Vp), _unpermute(order, gnrm), iters


def mix_backward(S, V, gnrm, free, order, iters, prox_lam, a):
    Vp, gnrmp, freep, ap = _permute(order, V, gnrm, free, a)
    Up = torch.zeros_like(Vp)
    zero = np.zeros((), dtype=Vp.numpy().dtype)[()]
    _backward(_gram(S, order).numpy(), Vp.numpy(), gnrmp.numpy(), freep.numpy(), ap.numpy(),
              iters.numpy(), zero + prox_lam, Up.numpy(), zero)
    return _unpermute(order, Up)
