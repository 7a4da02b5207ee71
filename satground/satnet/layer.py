"""The SATNet layer (Wang, Donti, Wilder & Kolter, ICML 2019) with the published interface.

A low-rank SDP relaxation of MAXSAT solved by the mixing method. Variables are unit vectors
in R^k: v_0 is the truth direction (fixed to e_0), then the n problem variables, then `aux`
auxiliary ones. Inputs are fixed to v_i = -cos(pi z_i) e_0 + sign * sin(pi z_i) e_1; the free
variables are found by coordinate descent, and the output is z_i = arccos(-v_i . v_0) / pi.

The backward pass differentiates the fixed point implicitly (see `MixingFunction.backward`).
The coordinate-descent loops live in interchangeable backends (reference PyTorch, C CPU,
Triton GPU), each given the Gram matrix C = S S^T (computed when S changes, kept for the
backward); everything around them (initialisation, outputs, gradients of S and z) is here,
shared, so the backends differ only in how fast they run those loops.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from . import reference
from .errors import NonFiniteError, SetupError  # noqa: F401 (SetupError: re-exported, the backends raise it)

BACKENDS = ("auto", "reference", "cpu", "gpu")
NONFINITE = ("raise", "drop")
# compute dtypes (S's dtype) the compiled kernels are written for; the reference runs any float
BACKEND_DTYPES = {"cpu": (torch.float32, torch.float64), "gpu": (torch.float32, torch.float64)}


GEMMS = ("fp32", "bf16", "auto")
_gemm_dtype: torch.dtype | None = None  # the GEMMs' input dtype (check_setup); None: the layer's own


def check_setup(device: torch.device, precision: str | None = None, gemm: str = "fp32") -> None:
    """What the backend of `device` needs from this machine, checked before any work: on CPU
    the precision of the kernel's float32 products (`precision`, a stage's satnet.precision,
    kept for the process; None: SATGROUND_CPU_PRECISION), the SATGROUND_CPU_* settings and a
    working C compiler (it builds the float32 kernel). The GPU kernel computes in float32.

    gemm (a stage's satnet.gemm, kept for the process): the precision of the layer's three GEMMs
    outside the sweeps, S S^T and the backward's W = sum_b U_b V_b^T and (W + W^T) S. fp32: S's
    dtype, as published; bf16: their inputs rounded to bfloat16, fp32 sums, the result rounded
    to bfloat16 (about 2^-8 relative; fast on CPUs with AVX512_BF16 or AMX); auto: bf16 where
    the CPU kernel takes bf16 products, else fp32."""
    global _gemm_dtype
    if gemm not in GEMMS:
        raise SetupError(f"satnet.gemm must be one of {', '.join(GEMMS)}, got {gemm!r}")
    if device.type == "cpu":
        from . import cpu
        cpu.check_setup(precision)
        if gemm == "auto":
            gemm = "bf16" if cpu.precision_name() == "bf16" else "fp32"
    elif gemm == "auto":
        gemm = "fp32"
    _gemm_dtype = torch.bfloat16 if gemm == "bf16" else None


def _mm(a, b, low: torch.dtype | None):
    """a @ b, its inputs in `low` where given (the result back in a's dtype)."""
    return a @ b if low is None else (a.to(low) @ b.to(low)).to(a.dtype)


def kernel_description(device: torch.device, k: int) -> str:
    """Which kernel runs SATNet of rank k on `device`, for a run's record: on CPU the tile built
    and the products its float32 sweeps take there (`auto` resolved; fp32 where no bf16 tile
    runs), e.g. "bf16 products; avx512 12x2 vectors of 64 bytes"."""
    if device.type == "cpu":
        from . import cpu
        return f"{cpu.products(k)} products; {cpu.tile_shape()}"
    return "triton" if device.type == "cuda" else device.type


def _resolve(name: str, device: torch.device) -> str:
    """The backend "auto" stands for on this device; other names unchanged."""
    if name == "auto":
        return "gpu" if device.type == "cuda" else "cpu" if device.type == "cpu" else "reference"
    return name


def _backend(name: str, device: torch.device):
    """The module implementing mix_forward / mix_backward for this device."""
    name = _resolve(name, device)
    if name == "reference":
        return reference
    if name == "cpu":
        from . import cpu
        return cpu
    if name == "gpu":
        from . import gpu
        return gpu
    raise ValueError(f"SATNet backend must be one of {BACKENDS}, got {name!r}")


def init_vectors(z_all, is_input_all, k: int, generator=None):
    """Random unit vectors for free variables; the fixed embedding for inputs (and truth).

    Returns V (B, N, k) and sign (B, N): the sign of each input vector's e_1 part, kept from the
    random draw as the published code does.
    """
    B, N = z_all.shape
    draw_on = generator.device if generator is not None else z_all.device
    V = torch.randn(B, N, k, dtype=z_all.dtype, device=draw_on, generator=generator)
    V = V.to(z_all.device)
    V = V / V.norm(dim=2, keepdim=True)
    sign = torch.where(V[:, :, 1] >= 0, 1.0, -1.0).to(z_all.dtype)
    fixed = torch.zeros_like(V)
    fixed[:, :, 0] = -torch.cos(math.pi * z_all)
    fixed[:, :, 1] = sign * torch.sin(math.pi * z_all)
    return torch.where(is_input_all[:, :, None], fixed, V), sign


def gram(S, low: torch.dtype | None = None):
    """C = S S^T (N, N), the matrix every sweep reads; its inputs in `low` where given."""
    return _mm(S.detach(), S.detach().T, low)


class GramCache:
    """S S^T for the S it was last computed from, recomputed only when S's values change: a
    frozen S (evaluation, the tuned classifier, the re-read's votes) pays its GEMM once, not once
    a batch. The check compares values, not S's version counter, which a write through `.data`
    would bypass; it reads S once, a small fraction of the GEMM's cost."""

    def __init__(self):
        self._S = self._C = self._low = None

    def __call__(self, S, low: torch.dtype | None = None):
        S = S.detach()
        if not (self._S is not None and self._low == low and self._S.shape == S.shape
                and self._S.dtype == S.dtype and self._S.device == S.device and torch.equal(self._S, S)):
            self._S, self._C, self._low = S.clone(), gram(S, low), low
        return self._C


def _finite_rows(x, dim=0):
    """Bool along `dim` (the samples): that slice of x holds no NaN/inf. Exact, in two passes
    where isfinite().all() takes five: x * 0 is 0 for a finite x and NaN for NaN or inf, and a
    sum of zeros cannot overflow."""
    return (x * 0).sum(dim=[d for d in range(x.dim()) if d != dim]) == 0


def _samples(mask) -> str:
    """"[i, j, ...]": the first few samples flagged in a (B,) bool mask."""
    rows = mask.nonzero().flatten().tolist()
    return "[" + ", ".join(map(str, rows[:10])) + (", ...]" if len(rows) > 10 else "]")


class SweepCount:
    """The forward sweeps run, summed over samples since the last reset (the backward runs as
    many): how many of max_iter the vectors need before they settle to eps."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.sweeps = self.samples = 0

    def mean(self) -> float | None:
        """Mean sweeps a sample since the last reset; None before any forward."""
        return self.sweeps / self.samples if self.samples else None


class MixingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, S, z, is_input, max_iter, eps, prox_lam, k, backend_name, generator,
                drop=None, count=None, backward_sweeps=None, C=None, low=None):
        """drop: optional (B,) bool, samples whose gradient is zero (see SATNet's nonfinite);
        count: a SweepCount the sweeps run are added to; backward_sweeps: the most sweeps a
        sample's backward runs (None: as many as its forward ran, the published rule);
        C: S S^T when the caller holds it (None: computed here); low: the GEMMs' input dtype
        (check_setup's gemm; None: S's)."""
        B, n = z.shape
        N = S.shape[0]
        # variable 0 is truth (an input fixed at z = 1), then problem variables, then aux
        z_all = torch.zeros(B, N, dtype=S.dtype, device=S.device)
        z_all[:, 0] = 1.0
        z_all[:, 1:n + 1] = z.to(S.dtype)
        fixed = torch.zeros(B, N, dtype=torch.bool, device=S.device)
        fixed[:, 0] = True
        fixed[:, 1:n + 1] = is_input
        free = ~fixed

        V, sign = init_vectors(z_all, fixed, k, generator)
        draw_on = generator.device if generator is not None else S.device
        order = torch.randperm(N, generator=generator, device=draw_on).to(S.device)
        backend = _backend(backend_name, S.device)
        if C is None:  # the Gram matrix every sweep reads, kept for the backward
            C = gram(S, low)
        V, gnrm, iters = backend.mix_forward(C, V, free, order, max_iter, eps)
        if count is not None:
            count.sweeps += int(iters.sum())
            count.samples += B

        # v_0 = e_0, so -v_i . v_0 = -V[:, i, 0]; inputs pass through exactly
        z_out = torch.acos((-V[:, 1:n + 1, 0]).clamp(-1.0, 1.0)) / math.pi
        z_out = torch.where(is_input, z.to(S.dtype), z_out)
        # a sample whose ||g_i|| overflowed (S far too large for the dtype) holds meaningless
        # vectors: mark it with NaN outputs (SATNet.forward raises on them), never return them
        z_out = torch.where(_finite_rows(gnrm)[:, None], z_out, math.nan)

        if backward_sweeps is not None:
            iters = iters.clamp(max=backward_sweeps)
        ctx.save_for_backward(S, C, V, gnrm, free, order, iters, z_all, sign, drop)
        ctx.prox_lam, ctx.low = prox_lam, low
        ctx.backend = backend
        ctx.n = n
        return z_out.to(z.dtype)

    @staticmethod
    def backward(ctx, dz):
        S, C, V, gnrm, free, order, iters, z_all, sign, drop = ctx.saved_tensors
        n = ctx.n
        B, N, k = V.shape
        dz = dz.to(S.dtype)

        # dL/dv_i for free outputs, projected on the tangent of v_i. Writing v_i = (c, s u)
        # with u a unit vector, z_i = arccos(-c)/pi grows at rate 1/pi along the unit tangent
        # (s, -c u); using it directly avoids dividing by sin(pi z_i), which is 0 in float32
        # once an output is confident.
        v = V[:, 1:n + 1]
        c = v[:, :, :1]
        perp = v[:, :, 1:]
        s = perp.norm(dim=2, keepdim=True)
        tangent = torch.cat([s, -c * perp / s.clamp_min(1e-30)], dim=2)
        a = torch.zeros_like(V)
        a[:, 1:n + 1] = (dz / math.pi)[:, :, None] * tangent
        a = a * free[:, :, None]

        U = ctx.backend.mix_backward(C, V, gnrm, free, order, iters, ctx.prox_lam, a)

        # dL/dz at inputs: v_i = (-cos pi z, sign sin pi z, 0..), dv/dz = pi (sin, sign cos)
        # and dL/dv_i = -(Phi s_i) for a fixed variable, Phi = U^T S per sample; only its first
        # two coordinates are needed, and (Phi s_i)'s are (C U)_i's (C = S S^T, from the forward).
        # Plus the unchanged pass-through.
        phi_s = torch.einsum("nj,bjc->bcn", C[1:n + 1], U[:, :, :2])  # (B, 2, n)
        zi = z_all[:, 1:n + 1]
        dz_in = -math.pi * (phi_s[:, 0] * torch.sin(math.pi * zi)
                            + sign[:, 1:n + 1] * phi_s[:, 1] * torch.cos(math.pi * zi))
        dz_in = torch.where(free[:, 1:n + 1], 0.0, dz_in + dz)

        # a sample whose fixed point is degenerate (or that was dropped) gives exactly zero
        # gradient, never NaN (published safety). Its U and V are replaced, not multiplied by
        # 0: 0 * NaN is NaN, and the dS GEMM below sums over every sample.
        keep = (_finite_rows(U) & _finite_rows(V) & _finite_rows(dz_in) & _finite_rows(gnrm)
                & ~((gnrm < 1e-12) & free).any(dim=1))
        if drop is not None:
            keep &= ~drop
        if not keep.all():
            U, V = (torch.where(keep[:, None, None], x, 0.0) for x in (U, V))
            dz_in = torch.where(keep[:, None], dz_in, 0.0)

        # dS = -sum_i (U_i V_i^T + V_i U_i^T) S = -(W + W^T) S with W = sum_i U_i V_i^T: one GEMM
        # over the batch, then one with S; two thirds of the products of forming U_i^T S and
        # V_i^T S first, and no (B, N, m) intermediate
        dS = None
        if ctx.needs_input_grad[0]:  # a frozen S (the classifier tuned through SATNet) needs none
            W = _mm(U.transpose(0, 1).reshape(N, B * k), V.transpose(0, 1).reshape(N, B * k).T, ctx.low)
            dS = -_mm(W + W.T, S, ctx.low)
        return dS, dz_in, None, None, None, None, None, None, None, None, None, None, None, None


class SATNet(nn.Module):
    """Differentiable MAXSAT layer, interface of the published `satnet.SATNet`.

    n: problem variables; m: clauses; aux: auxiliary variables; max_iter / eps: forward
    stopping rule (eps relative to the first sweep's decrease); backward_sweeps: the most sweeps
    of a sample's backward (None: as many as its forward ran, the published rule; fewer give a
    cheaper, rougher gradient); prox_lam: diagonal added in the backward solve; weight_normalize: the published init scaling. zero_input_outputs: return 0
    at input positions (the ungrounded model, Appendix B: values elsewhere and gradients into S
    are the same; input predictions then come from the classifier). backend: "auto" (the C kernel on
    CPU, Triton on CUDA), "reference", "cpu" or "gpu"; cpu and gpu compute in float32 or
    float64 (S's dtype), the reference in any float dtype. k: vector rank (the published code: 32).

    nonfinite: what a NaN/inf anywhere in z does. "raise" (default): a NonFiniteError (a
    ValueError) naming the samples. "drop": those samples are solved with their non-finite
    entries replaced by 0.5 (so their outputs are finite but meaningless) and get exactly zero
    gradient, into S and into z alike; the other samples are unaffected.

    The forward also raises NonFiniteError when S holds a NaN/inf or is so large that the solve
    overflows its dtype: never silent NaN or garbage outputs.
    """

    def __init__(self, n, m, aux=0, max_iter=40, eps=1e-4, prox_lam=1e-2, weight_normalize=True,
                 zero_input_outputs=False, backend="auto", k=32, nonfinite="raise",
                 backward_sweeps=None):
        super().__init__()
        if (n < 1 or m < 1 or aux < 0 or max_iter < 1 or eps < 0 or prox_lam < 0 or k < 2
                or (backward_sweeps is not None and backward_sweeps < 1)):
            raise ValueError(f"SATNet: invalid sizes n={n} m={m} aux={aux} max_iter={max_iter} "
                             f"eps={eps} prox_lam={prox_lam} k={k} backward_sweeps={backward_sweeps}")
        if backend not in BACKENDS:
            raise ValueError(f"SATNet backend must be one of {BACKENDS}, got {backend!r}")
        if nonfinite not in NONFINITE:
            raise ValueError(f"SATNet nonfinite must be one of {NONFINITE}, got {nonfinite!r}")
        self.nonfinite = nonfinite
        self.n, self.m, self.aux, self.k = n, m, aux, k
        self.max_iter, self.eps, self.prox_lam = max_iter, eps, prox_lam
        # the most sweeps a sample's backward runs; None: as many as its forward (published).
        # A training setting (satnet.backward_sweeps), not part of the trained model
        self.backward_sweeps = backward_sweeps
        self.sweep_count = SweepCount()  # read and reset by a training loop's curves
        self._gram = GramCache()
        # in eval mode, run exactly this many sweeps (no early stop); None: max_iter and eps.
        # An inference setting (satnet.solve_sweeps), not part of the trained model
        self.solve_sweeps = None
        self.zero_input_outputs = zero_input_outputs
        self.backend = backend
        N = n + 1 + aux
        S = torch.randn(N, m)
        if weight_normalize:
            S = S * math.sqrt(0.5 / (N + m))
        self.S = nn.Parameter(S)

    def forward(self, z, is_input, generator=None):
        if z.dim() != 2 or z.shape[1] != self.n or is_input.shape != z.shape:
            raise ValueError(f"SATNet expects z and is_input of shape (B, {self.n}), "
                             f"got {tuple(z.shape)} and {tuple(is_input.shape)}")
        if z.shape[0] == 0:
            raise ValueError("SATNet: empty batch (B=0)")
        S = self.S.detach()
        backend = _resolve(self.backend, S.device)
        if backend in BACKEND_DTYPES and S.dtype not in BACKEND_DTYPES[backend]:
            raise ValueError(f"SATNet: the {backend} backend needs float32 or float64 "
                             f"inputs/parameters, got {S.dtype} (use backend='reference')")
        self._check_S(S)
        is_input = is_input.bool()
        bad = ~torch.isfinite(z)
        drop = None
        if bad.any():
            drop = bad.any(dim=1)
            if self.nonfinite == "raise":
                raise NonFiniteError(f"SATNet: z has {int(bad.sum())} non-finite entries "
                                     f"(NaN/inf) in sample(s) {_samples(drop)}")
            z = torch.where(bad, 0.5, z)  # a constant: no gradient reaches the bad entries
        # clamp() passes no gradient at its bounds, and a confident classifier's probabilities
        # are exactly 0 or 1: only values outside [0, 1] are clamped (and get no gradient)
        z = torch.where((z >= 0) & (z <= 1), z, z.clamp(0.0, 1.0))
        max_iter, eps = self.max_iter, self.eps
        if self.solve_sweeps is not None and not self.training:
            max_iter, eps = self.solve_sweeps, 0.0
        out = MixingFunction.apply(self.S, z, is_input, max_iter, eps,
                                   self.prox_lam, self.k, self.backend, generator, drop,
                                   self.sweep_count, self.backward_sweeps,
                                   self._gram(self.S, _gemm_dtype), _gemm_dtype)
        finite = _finite_rows(out)
        if not finite.all():
            raise NonFiniteError(f"SATNet: non-finite outputs in sample(s) {_samples(~finite)} "
                                 f"(S has max |S| = {S.abs().max().item():.3g} in {S.dtype}: "
                                 f"the solve overflowed)")
        if self.zero_input_outputs:
            out = torch.where(is_input, torch.zeros_like(out), out)
        return out

    @staticmethod
    def _check_S(S):
        """NonFiniteError unless S is finite and small enough that no sum of the solve overflows.

        |C_ij| <= |s_i| |s_j| (Cauchy-Schwarz, C = S S^T), so every g_i = sum_j C_ij v_j, in any
        summation order, stays below N max_i |s_i|^2. Past that, g can hold inf or NaN, which the
        reference backend would skip over silently and return garbage outputs. (An overflow of
        ||g_i|| itself shows in gnrm and is caught after the solve.)
        """
        limit = torch.finfo(S.dtype).max / S.shape[0]
        if (S.square().sum(dim=1) <= limit).all():  # False for NaN too
            return
        n_bad = int((~torch.isfinite(S)).sum())
        if n_bad:
            raise NonFiniteError(f"SATNet: S has {n_bad} non-finite entries (NaN/inf)")
        raise NonFiniteError(f"SATNet: S is too large for {S.dtype} (max |S| = "
                             f"{S.abs().max().item():.3g}): the solve's sums would overflow")

    def extra_repr(self):
        return (f"n={self.n}, m={self.m}, aux={self.aux}, max_iter={self.max_iter}, "
                f"eps={self.eps}, prox_lam={self.prox_lam}, backend={self.backend!r}, "
                f"nonfinite={self.nonfinite!r}")
