"""Pure-PyTorch reference of the two coordinate-descent loops of the mixing method.

Readable, batched, any device and dtype; the oracle every fast backend is tested against.
Both loops visit the free variables of each sample in the shared random `order`; a sample
stops (forward) when its sweep decrease drops below eps times its first sweep's, and the
backward runs as many sweeps as that sample's forward did.

Shapes: S (N, m); V, U, a (B, N, k); free (B, N) bool; order (N,) long.
"""
from __future__ import annotations

import torch

TINY = 1e-12  # a ||g_i|| below this leaves v_i where it is (its gradient is then zeroed)


def mix_forward(C, V, free, order, max_iter: int, eps: float):
    """Minimise <C, V V^T> (C = S S^T) over the free unit vectors by the mixing method, in place
    on V.

    v_i <- -g_i / ||g_i||, g_i = sum_{j != i} C_ij v_j.
    Returns (V, gnrm (B, N): ||g_i|| of each variable's last update, iters (B,) long).
    """
    B = V.shape[0]
    gnrm = torch.zeros(B, C.shape[0], dtype=V.dtype, device=V.device)
    iters = torch.zeros(B, dtype=torch.long, device=V.device)
    active = torch.ones(B, dtype=torch.bool, device=V.device)
    threshold = None
    for sweep in range(max_iter):
        delta = torch.zeros(B, dtype=V.dtype, device=V.device)
        for i in order.tolist():
            update = free[:, i] & active
            if not update.any():
                continue
            g = torch.einsum("n,bnk->bk", C[i], V) - C[i, i] * V[:, i]
            g_norm = g.norm(dim=1)
            update &= g_norm > TINY
            v_new = -g / g_norm.clamp_min(TINY)[:, None]
            dv = v_new - V[:, i]
            V[:, i] = torch.where(update[:, None], v_new, V[:, i])
            gnrm[:, i] = torch.where(update, g_norm, gnrm[:, i])
            # this update lowers the objective by ||g_i|| * ||dv||^2
            delta += torch.where(update, g_norm * (dv * dv).sum(dim=1), 0.0)
        iters += active.long()
        if sweep == 0:
            threshold = eps * delta
        active &= ~(delta < threshold)
        if not active.any():
            break
    return V, gnrm, iters


def mix_backward(C, V, gnrm, free, order, iters, prox_lam: float, a):
    """Solve P (C - D_sii + D_g + prox_lam I) P U = a (C = S S^T) by Gauss-Seidel sweeps.

    P projects each row onto the tangent space of v_i; a must already be projected.
    Each sample runs as many sweeps as its forward did. Returns U (B, N, k).
    """
    U = torch.zeros_like(V)
    for sweep in range(int(iters.max().item()) if iters.numel() else 0):
        active = iters > sweep
        for i in order.tolist():
            update = free[:, i] & active
            if not update.any():
                continue
            h = torch.einsum("n,bnk->bk", C[i], U) - C[i, i] * U[:, i]
            h = h - (h * V[:, i]).sum(dim=1, keepdim=True) * V[:, i]
            u_new = (a[:, i] - h) / (gnrm[:, i] + prox_lam)[:, None]
            U[:, i] = torch.where(update[:, None], u_new, U[:, i])
    return U
