"""Blocked mixing method: the coordinate-descent loops as GEMMs plus small sequential kernels.

Each update needs g_i = sum_{j != i} C_ij v_j with C = S S^T. Updating the variables of a block
one after another, the g of every variable in the block can be computed up front from the
vectors at the block's start with one GEMM over the whole batch,

    G = C[block, :] @ V        (b x N) @ (N x B*k),

and corrected inside the block for the updates made before it:

    g_q = G_q - C_qq v_q(start) + sum_{p < q in block} C_qp dv_p.

The GEMM does almost all the arithmetic at BLAS speed; a small Triton kernel (gpu.py) runs the
sequential in-block part. (The CPU backend, cpu.py, goes per sample instead: on two cores,
skipping each sample's fixed variables beats a batch-wide GEMM over all of them.) Variables are visited in exactly the order
of the reference, so results agree with it up to float rounding. The backward's Gauss-Seidel
solve has the same structure with U in place of V.

Everything runs in the permuted order: C is permuted once per call so blocks are contiguous
slices. Layout inside: (N, B, k), so that V viewed as (N, B*k) is the GEMM's right operand.
"""
from __future__ import annotations

import torch

BLOCK = 64


def _permuted(C, order, *per_var):
    C = C[order][:, order].contiguous()
    return C, [x[:, order].transpose(0, 1).contiguous() for x in per_var]


def _unpermute(order, x):
    """(N, B, ...) in permuted order -> (B, N, ...) in variable order."""
    out = torch.empty_like(x)
    out[order] = x
    return out.transpose(0, 1).contiguous()


def mix_forward(C, V, free, order, max_iter, eps, block_kernel):
    N, B = C.shape[0], V.shape[0]
    C, (Vp, freep) = _permuted(C, order, V, free)
    flat = Vp.view(N, -1)
    gnrm = torch.zeros(N, B, dtype=V.dtype, device=V.device)
    iters = torch.zeros(B, dtype=torch.long, device=V.device)
    active = torch.ones(B, dtype=torch.bool, device=V.device)
    delta = torch.zeros(B, dtype=V.dtype, device=V.device)
    threshold = None
    for sweep in range(max_iter):
        delta.zero_()
        for start in range(0, N, BLOCK):
            end = min(start + BLOCK, N)
            G = (C[start:end] @ flat).view(end - start, B, -1)
            block_kernel(G, C[start:end, start:end], start, Vp, freep, active, gnrm, delta)
        iters += active.long()
        if sweep == 0:
            threshold = eps * delta
        active &= delta >= threshold
        if not active.any():
            break
    return _unpermute(order, Vp), _unpermute(order, gnrm), iters


def mix_backward(C, V, gnrm, free, order, iters, prox_lam, a, block_kernel):
    N, B = C.shape[0], V.shape[0]
    C, (Vp, freep, gnrmp, ap) = _permuted(C, order, V, free, gnrm, a)
    Up = torch.zeros_like(Vp)
    flat = Up.view(N, -1)
    # a one-element tensor, not a Python float: Triton would pass a float as float32
    prox = torch.full((1,), prox_lam, dtype=V.dtype, device=V.device)
    for sweep in range(int(iters.max().item()) if iters.numel() else 0):
        active = iters > sweep
        for start in range(0, N, BLOCK):
            end = min(start + BLOCK, N)
            H = (C[start:end] @ flat).view(end - start, B, -1)
            block_kernel(H, C[start:end, start:end], start, Vp, Up, freep, active, gnrmp, ap,
                         prox)
    return _unpermute(order, Up)
