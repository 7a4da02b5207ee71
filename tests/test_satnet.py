"""The SATNet layer: gradients against finite differences, backends against the reference,
pass-through of inputs, the published safety and stopping rules, and that it learns 4x4 Sudoku."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from satground.satnet import SATNet, check_setup, kernel_description
from satground.satnet.cpu import X86


def run(layer, z, is_input, seed=1):
    """The forward is random (init, order, input signs): seed every call alike."""
    return layer(z, is_input, generator=torch.Generator().manual_seed(seed))


def random_problem(n, batch, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    z = torch.rand(batch, n, generator=g, dtype=dtype)
    is_input = torch.rand(batch, n, generator=g) < 0.4
    weights = torch.randn(batch, n, generator=g, dtype=dtype)
    return z, is_input, weights


def layer_pair(backend, n, m, aux, dtype, **kw):
    torch.manual_seed(0)
    ref = SATNet(n, m, aux, backend="reference", **kw).to(dtype)
    other = SATNet(n, m, aux, backend=backend, **kw).to(dtype)
    other.load_state_dict(ref.state_dict())
    return ref, other


def value_and_grads(layer, z, is_input, weights):
    z = z.clone().requires_grad_()
    layer.zero_grad()
    out = run(layer, z, is_input)
    (out * weights).sum().backward()
    return out.detach(), layer.S.grad.clone(), z.grad.clone()


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("backend,seed", [("reference", 1), ("cpu", 0), ("cpu", 2), ("cpu", 3),
                                          pytest.param("gpu", 4, marks=needs_cuda)])
def test_gradients_match_central_finite_differences(backend, seed):
    # Converged forward (prox_lam=0, tiny eps): implicit differentiation is then exact. Double
    # precision; the numba backend (equal to the reference to 1e-10, tested below) runs the
    # thousands of sweeps of the extra seeds quickly.
    torch.manual_seed(seed)
    n, m, aux = 10, 12, 2
    device = "cuda" if backend == "gpu" else "cpu"
    layer = SATNet(n, m, aux, max_iter=2000, eps=1e-14, prox_lam=0.0, backend=backend).double().to(device)
    z, is_input, w = (x.to(device) for x in random_problem(n, 3, seed))
    is_input[:, 0] = True  # at least one input per sample
    _, dS, dz = value_and_grads(layer, z, is_input, w)
    loss = lambda zz: (run(layer, zz, is_input) * w).sum().item()  # noqa: E731
    h = 1e-6
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _ in range(6):
            i, j = torch.randint(layer.S.shape[0], (1,), generator=g).item(), \
                torch.randint(m, (1,), generator=g).item()
            layer.S[i, j] += h
            plus = loss(z)
            layer.S[i, j] -= 2 * h
            minus = loss(z)
            layer.S[i, j] += h
            assert dS[i, j].item() == pytest.approx((plus - minus) / (2 * h), rel=2e-3, abs=1e-5)
        for b, i in is_input.nonzero().tolist()[:6]:
            zp, zm = z.clone(), z.clone()
            zp[b, i] += h
            zm[b, i] -= h
            assert dz[b, i].item() == pytest.approx((loss(zp) - loss(zm)) / (2 * h), rel=2e-3, abs=1e-5)
    assert (dz[~is_input] == 0).all()  # outputs are not inputs: no gradient to their z


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_a_frozen_S_gets_no_gradient_and_z_the_same_one(backend):
    # the classifier tuned through a frozen SATNet (train.tune_epochs): dS is skipped, dz is not
    torch.manual_seed(0)
    layer = SATNet(10, 12, 2, max_iter=40, backend=backend).double()
    z, is_input, w = random_problem(10, 3, 0)
    _, _, dz = value_and_grads(layer, z, is_input, w)
    layer.S.requires_grad_(False)
    layer.S.grad = None
    zz = z.clone().requires_grad_()
    (run(layer, zz, is_input) * w).sum().backward()
    assert layer.S.grad is None
    assert torch.equal(zz.grad, dz)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_inputs_of_exactly_zero_and_one_keep_their_gradient(backend):
    # a confident classifier's probabilities are exactly 0 or 1; the layer is smooth there, so
    # the gradient is the limit from inside (torch's clamp gives 0 at its bounds)
    torch.manual_seed(0)
    layer = SATNet(10, 12, 2, max_iter=2000, eps=1e-14, backend=backend).double()
    z, is_input, w = random_problem(10, 3, 0)
    z = torch.where(is_input, (z > 0.5).double(), z)
    inside = torch.where(is_input, z.clamp(1e-9, 1 - 1e-9), z)
    _, _, dz = value_and_grads(layer, z, is_input, w)
    _, _, dz_inside = value_and_grads(layer, inside, is_input, w)
    assert (dz[is_input] != 0).all()
    assert torch.allclose(dz, dz_inside, atol=1e-6 * dz.abs().max().item(), rtol=0)


@pytest.mark.parametrize("dtype,tol,k", [(torch.float64, 1e-10, 32), (torch.float32, 1e-3, 32),
                                         (torch.float64, 1e-10, 6)])
def test_cpu_backend_matches_reference(dtype, tol, k):
    # k=6 runs the kernel's paths for a rank that is not a multiple of its 4x4 tile
    ref, cpu = layer_pair("cpu", 40, 48, 10, dtype, max_iter=30, k=k)
    z, is_input, w = random_problem(40, 6, 0, dtype)
    for a, b in zip(value_and_grads(ref, z, is_input, w), value_and_grads(cpu, z, is_input, w)):
        assert torch.allclose(a, b, atol=tol * max(1.0, a.abs().max().item()), rtol=0)


@pytest.mark.parametrize("k", [16, 32])
@pytest.mark.parametrize("precision", ["bf16x3", "fp32"])
def test_cpu_precisions_match_the_reference(precision, k, monkeypatch):
    """Both float32 paths (AMX tiles with bf16x3 products and fp32 sums, where the CPU has
    them; the fp32 vector tile), at both ranks the AMX path takes (k = 16: one tile of sums;
    k = 32: two) and a few hundred free variables, against the reference run in float32 from the same start: values and gradients
    to the float32 tolerance of the tests above (measured: fp32 about 1e-5 of the largest
    value, bf16x3 about 1e-4)."""
    from satground.satnet import cpu
    if precision == "bf16x3" and not cpu.bf16x3_available():
        pytest.skip("no AMX tiles on this CPU: the fp32 test covers the path it runs")
    monkeypatch.setenv("SATGROUND_CPU_PRECISION", precision)
    assert_float32_cpu_matches_the_reference(k)


def assert_float32_cpu_matches_the_reference(k=32):
    """The cpu backend at the precision now selected against the float32 reference, rank k and a
    few hundred free variables: values and gradients to 1e-3 of the largest value."""
    ref, layer = layer_pair("cpu", 300, 120, 80, torch.float32, max_iter=60, eps=1e-6, k=k)
    z, is_input, w = random_problem(300, 4, 5, torch.float32)
    expected = value_and_grads(ref, z, is_input, w)
    for a, b in zip(expected, value_and_grads(layer, z, is_input, w)):
        assert torch.allclose(a, b, atol=1e-3 * max(1.0, a.abs().max().item()), rtol=0)


def bf16_run(monkeypatch, target=None, max_iter=1, k=32):
    """Values and gradients of one sweep with plain bf16 products (and the float32 reference),
    rank k."""
    from satground.satnet import cpu
    if target:
        monkeypatch.setenv("SATGROUND_CPU_TARGET", target)
    monkeypatch.setenv("SATGROUND_CPU_PRECISION", "bf16")
    if not cpu.bf16_available():
        pytest.skip("no bf16 products in this build: test_bf16_is_refused_where_not_built covers it")
    ref, layer = layer_pair("cpu", 300, 120, 80, torch.float32, max_iter=max_iter, eps=0.0, k=k)
    z, is_input, w = random_problem(300, 4, 5, torch.float32)
    return value_and_grads(ref, z, is_input, w), value_and_grads(layer, z, is_input, w)


def relative_errors(expected, got):
    return [((a - b).abs().max() / max(1.0, a.abs().max().item())).item() for a, b in zip(expected, got)]


@pytest.mark.parametrize("k", [16, 32])
def test_bf16_products_match_the_reference_to_bf16_precision(k, monkeypatch):
    """SATGROUND_CPU_PRECISION=bf16 (AMX tiles, or the vdpbf16ps tile: 16 rows x 1 vector at
    k = 16, 8 x 2 at 32): one sweep against the float32 reference, to bf16's precision (measured
    about 1e-3 to 4e-3 of the largest value; over many sweeps the rounding accumulates:
    docs/satnet-layer.md)."""
    expected, got = bf16_run(monkeypatch, k=k)
    assert max(relative_errors(expected, got)) < 2e-2


@pytest.mark.parametrize("k", [16, 32])
def test_the_vdpbf16ps_tile_takes_the_same_products_as_the_amx_tiles(k, monkeypatch):
    """Where the CPU has AMX and AVX512_BF16, the build for cooperlake (AVX512_BF16, no AMX) runs
    the vdpbf16ps tile: one sweep takes the AMX tiles' bf16 products, so the two differ only by
    their fp32 summation orders, each value and gradient far less (under a quarter) than either
    differs from the float32 reference. A fixed bound does not hold across CPUs: how the two
    instructions round their partial sums is the hardware's."""
    from satground.satnet import cpu
    if not (X86 and {"amx-bf16", "avx512bf16"} <= cpu.host_features()):
        pytest.skip("needs a CPU with both AMX-BF16 and AVX512_BF16")
    amx = bf16_run(monkeypatch, k=k)[1]
    expected, vector = bf16_run(monkeypatch, target="cooperlake", k=k)
    assert not cpu.bf16x3_available() and "avx512" in cpu.tile_shape()  # the build without AMX
    bf16_error = relative_errors(expected, amx)
    for between, error in zip(relative_errors(amx, vector), bf16_error):
        assert between < 0.25 * error, (between, error)
    assert max(relative_errors(expected, vector)) < 2e-2


def test_bf16_is_refused_where_not_built(monkeypatch):
    """An AVX2 build has neither AMX nor vdpbf16ps: bf16 is refused in one line, not run as fp32."""
    from satground.satnet import cpu
    from satground.satnet.layer import SetupError
    if not (X86 and all(f in cpu.host_features() for f in cpu.X86_LEVELS["x86-64-v3"])):
        pytest.skip("needs an x86-64-v3 CPU")
    monkeypatch.setenv("SATGROUND_CPU_TARGET", "x86-64-v3")
    monkeypatch.setenv("SATGROUND_CPU_PRECISION", "bf16")
    layer = SATNet(10, 12, 2, backend="cpu")
    z, is_input, _ = random_problem(10, 2, 0, torch.float32)
    with pytest.raises(SetupError, match="SATGROUND_CPU_PRECISION bf16: the kernel built for "
                                         "SATGROUND_CPU_TARGET=x86-64-v3 has neither"):
        layer(z, is_input)
    monkeypatch.delenv("SATGROUND_CPU_PRECISION")  # a stage's satnet.precision: named in the error
    with pytest.raises(SetupError, match="satnet.precision bf16: the kernel built for"):
        check_setup(torch.device("cpu"), "bf16")


@pytest.mark.parametrize("k", [12, 16, 32, 48])
def test_the_kernel_description_names_the_products_that_run(k):
    """A run's record names the products its sweeps took, read off what the kernel does: where it
    says fp32, the values and gradients are the fp32 tile's bit for bit; where it names a bf16
    path, they differ from them. Every precision this build takes, at ranks its bf16 tiles take
    (12, padded to 16 by the AVX-512 builds that have them; 16; 32) and one they do not (48)."""
    from satground.satnet import cpu

    def outputs(precision):
        check_setup(torch.device("cpu"), precision)
        torch.manual_seed(0)
        layer = SATNet(60, 48, 10, backend="cpu", k=k, max_iter=5, eps=0.0)
        z, is_input, w = random_problem(60, 3, 2, torch.float32)
        return value_and_grads(layer, z, is_input, w), cpu.products(k)

    fp32, name = outputs("fp32")
    assert name == "fp32"
    for precision in ["bf16x3", "auto"] + (["bf16"] if cpu.bf16_available() else []):
        got, name = outputs(precision)
        same = all(torch.equal(a, b) for a, b in zip(fp32, got))
        assert same == (name == "fp32"), (precision, name)
        assert kernel_description(torch.device("cpu"), k).startswith(name + " products; ")


def test_auto_precision_is_bf16_where_built_and_bf16x3_elsewhere(monkeypatch):
    """satnet.precision auto (the default profile's): plain bf16 products on a build that has
    them, the bf16x3/fp32 path on one that does not (the AVX2 build), never refused."""
    from satground.satnet import cpu
    check_setup(torch.device("cpu"), "auto")
    assert cpu.precision_name() == ("bf16" if cpu.bf16_available() else "bf16x3")
    assert kernel_description(torch.device("cpu"), 16).startswith(cpu.products(16) + " products; ")
    if not (X86 and all(f in cpu.host_features() for f in cpu.X86_LEVELS["x86-64-v3"])):
        return
    monkeypatch.setenv("SATGROUND_CPU_TARGET", "x86-64-v3")
    check_setup(torch.device("cpu"), "auto")
    assert cpu.precision_name() == "bf16x3" and cpu._precision() == cpu.PRECISIONS["bf16x3"]
    assert_float32_cpu_matches_the_reference()


def test_a_stage_precision_wins_over_the_variable_and_is_checked(monkeypatch):
    """check_setup(device, satnet.precision) sets the kernel's products for the process, over
    SATGROUND_CPU_PRECISION; a bad name stops it in one line naming the parameter."""
    from satground.satnet import cpu
    from satground.satnet.layer import SetupError
    monkeypatch.setenv("SATGROUND_CPU_PRECISION", "bf16x3")
    check_setup(torch.device("cpu"), "fp32")
    assert cpu._precision() == cpu.PRECISIONS["fp32"]
    with pytest.raises(SetupError, match="satnet.precision must be one of"):
        check_setup(torch.device("cpu"), "half")


def test_bf16_gemms_match_the_fp32_ones_to_bf16_precision():
    """satnet.gemm bf16: the layer's GEMMs outside the sweeps (S S^T, the backward's two) take
    bfloat16 inputs; outputs and both gradients stay within bf16's precision of the fp32 GEMMs'.
    auto takes them where the kernel takes bf16 products; a bad name is refused naming the key."""
    from satground.satnet import cpu, layer as layer_module
    from satground.satnet.layer import SetupError
    torch.manual_seed(0)
    layer = SATNet(30, 40, 10, max_iter=40, backend="cpu")
    z, is_input, w = random_problem(30, 4, 0, torch.float32)
    check_setup(torch.device("cpu"), "fp32", "fp32")
    out, dS, dz = value_and_grads(layer, z, is_input, w)
    check_setup(torch.device("cpu"), "fp32", "bf16")
    low_out, low_dS, low_dz = value_and_grads(layer, z, is_input, w)
    assert not torch.equal(low_dS, dS)  # the GEMMs did change

    def relative(a, b):
        return ((a - b).norm() / b.norm()).item()
    assert relative(low_out, out) < 1e-2 and relative(low_dS, dS) < 5e-2 and relative(low_dz, dz) < 5e-2
    check_setup(torch.device("cpu"), "auto", "auto")
    assert layer_module._gemm_dtype == (torch.bfloat16 if cpu.precision_name() == "bf16" else None)
    with pytest.raises(SetupError, match="satnet.gemm must be one of fp32, bf16, auto, got 'half'"):
        check_setup(torch.device("cpu"), "auto", "half")


def test_cpu_precision_setting_is_checked(monkeypatch):
    monkeypatch.setenv("SATGROUND_CPU_PRECISION", "bfloat")
    layer = SATNet(10, 12, 2, backend="cpu")
    z, is_input, _ = random_problem(10, 2, 0, torch.float32)
    from satground.satnet.layer import SetupError
    with pytest.raises(SetupError, match="SATGROUND_CPU_PRECISION must be one of"):
        layer(z, is_input)


@pytest.mark.parametrize("cc,message", [("/nonexistent/cc", "no C compiler"),
                                        ("false", "failed")])
def test_cpu_kernel_without_a_working_compiler_says_so(cc, message, monkeypatch, tmp_path):
    from satground.satnet import cpu
    monkeypatch.setenv("CC", cc)
    monkeypatch.setattr(cpu, "_cache_dir", lambda: tmp_path)
    cpu._build.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=message):
            SATNet(10, 12, 2, backend="cpu")(*random_problem(10, 2, 0, torch.float32)[:2])
    finally:
        cpu._build.cache_clear()
    assert list(tmp_path.iterdir()) == []  # no half-built library left behind


def test_the_cpu_kernel_gives_the_same_bits_on_any_thread_count():
    """A pass shares its samples out to the kernel's threads (torch's thread count, at most one
    a sample): each sample is one thread's from start to end, so one thread, a few, or more
    threads than samples give the same vectors, norms, sweeps and backward bit for bit. (The
    layer's torch ops around the kernel are torch's to keep or not.)"""
    from satground.satnet import cpu
    from satground.satnet.layer import init_vectors

    g = torch.Generator().manual_seed(0)
    B, N, k = 5, 300, 16
    S = torch.randn(N, 120, generator=g) / 12
    free = torch.rand(B, N, generator=g) < 0.6
    free[:, 0] = False
    V, _ = init_vectors(torch.rand(B, N, generator=g), ~free, k, g)
    order = torch.randperm(N, generator=g)
    a = torch.randn(B, N, k, generator=g) * free[:, :, None]
    C = S @ S.T
    threads, results = torch.get_num_threads(), []
    try:
        for n in (1, 3, 16):
            torch.set_num_threads(n)
            Vn, gnrm, iters = cpu.mix_forward(C, V, free, order, 30, 1e-4)
            U = cpu.mix_backward(C, Vn, gnrm, free, order, iters, 0.01, a)
            results.append((Vn, gnrm, iters, U))
    finally:
        torch.set_num_threads(threads)
    assert results[0][2].min() > 1 and results[0][3].abs().sum() > 0
    for other in results[1:]:
        assert all(torch.equal(x, y) for x, y in zip(results[0], other))


def test_cpu_backend_matches_reference_with_early_stopping():
    ref, cpu = layer_pair("cpu", 30, 40, 8, torch.float64, max_iter=200, eps=1e-3)
    z, is_input, w = random_problem(30, 5, 3)
    for a, b in zip(value_and_grads(ref, z, is_input, w), value_and_grads(cpu, z, is_input, w)):
        assert torch.allclose(a, b, atol=1e-9)


def test_gpu_backend_matches_reference_in_triton_interpreter():
    """The Triton kernels, run by Triton's CPU interpreter (no GPU needed; on a GPU the compiled
    kernels are tested below instead)."""
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the compiled kernels are tested")
    code = (
        "import torch, sys\n"
        "sys.path.insert(0, 'tests')\n"
        "from test_satnet import layer_pair, random_problem, value_and_grads\n"
        "err = 0.0\n"
        "for n, m, aux, k in [(6, 8, 2, 32), (50, 12, 20, 32), (50, 12, 20, 16)]:  # one block; two (71 > 64)\n"
        "    ref, gpu = layer_pair('gpu', n, m, aux, torch.float64, max_iter=3, k=k)\n"
        "    z, inp, w = random_problem(n, 2, 0)\n"
        "    err = max([err] + [(a - b).abs().max().item() for a, b in zip("
        "value_and_grads(ref, z, inp, w), value_and_grads(gpu, z, inp, w))])\n"
        "print(err)\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.strip().splitlines()[-1]) < 1e-10


@needs_cuda
@pytest.mark.parametrize("k", [32, 16])
@pytest.mark.parametrize("dtype,tol,eps", [(torch.float64, 1e-9, 1e-4), (torch.float32, 1e-3, 1e-4),
                                           (torch.float64, 1e-9, 0.0)])
def test_gpu_backend_matches_reference_on_cuda(dtype, tol, eps, k):
    """The Triton kernels compiled for the GPU; more variables than one block (64), early stop,
    at the published rank and at the default's (satnet.k)."""
    ref, gpu = layer_pair("gpu", 150, 60, 30, dtype, max_iter=25, eps=eps, k=k)
    gpu = gpu.cuda()
    z, is_input, w = random_problem(150, 7, 5, dtype)
    expected = value_and_grads(ref, z, is_input, w)
    got = value_and_grads(gpu, z.cuda(), is_input.cuda(), w.cuda())
    for a, b in zip(expected, got):
        assert torch.allclose(a, b.cpu(), atol=tol * max(1.0, a.abs().max().item()), rtol=0)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_inputs_pass_through_and_can_be_zeroed(backend):
    torch.manual_seed(0)
    layer = SATNet(20, 24, 4, backend=backend)
    z, is_input, _ = random_problem(20, 4, 0, torch.float32)
    out = run(layer, z, is_input)
    assert torch.equal(out[is_input], z[is_input])
    assert ((out >= 0) & (out <= 1)).all()
    layer.zero_input_outputs = True
    zeroed = run(layer, z, is_input)
    assert (zeroed[is_input] == 0).all()
    assert torch.equal(zeroed[~is_input], out[~is_input])  # only gradients differ, not values


def test_degenerate_sample_gets_zero_gradient_not_nan():
    torch.manual_seed(0)
    layer = SATNet(10, 12, 2, backend="cpu")
    z, is_input, _ = random_problem(10, 3, 0, torch.float32)
    z.requires_grad_()
    out = run(layer, z, is_input)
    upstream = torch.ones_like(out)
    upstream[1, ~is_input[1]] = float("nan")  # a poisoned sample
    out.backward(upstream)
    assert torch.isfinite(layer.S.grad).all() and torch.isfinite(z.grad).all()
    assert (z.grad[1] == 0).all() and (z.grad[0] != 0).any()


def test_backward_sweeps_caps_the_backward_alone():
    """satnet.backward_sweeps: with a cap below the forward's count, the forward is unchanged,
    the cpu gradient is the reference's under the same cap (the backends agree) and differs from
    the uncapped one (the cap acts); a cap at the forward's count changes nothing, bit for bit."""
    z, is_input, w = random_problem(30, 5, 3)

    def grads(backend, cap):
        torch.manual_seed(0)
        layer = SATNet(30, 40, 8, backend=backend, max_iter=30, eps=0.0, backward_sweeps=cap)
        return value_and_grads(layer.double(), z, is_input, w)

    capped, capped_ref, full = grads("cpu", 4), grads("reference", 4), grads("cpu", None)
    for a, b in zip(capped_ref, capped):
        assert torch.allclose(a, b, atol=1e-9)
    assert torch.equal(capped[0], full[0])
    assert not torch.allclose(capped[1], full[1], atol=1e-6)
    assert not torch.allclose(capped[2], full[2], atol=1e-6)
    for a, b in zip(grads("cpu", 30), full):
        assert torch.equal(a, b)


def test_backward_sweeps_reach_the_layer_from_the_solvers(tmp_path):
    from satground.solver.models import SymbolicSolver, checkpoint, load_solver
    solver = SymbolicSolver(2, 10, 4, backward_sweeps=3)
    assert solver.satnet.backward_sweeps == 3 and SymbolicSolver(2, 10, 4).satnet.backward_sweeps is None
    torch.save(checkpoint(solver), tmp_path / "solver.pt")
    # a training setting: never saved, given again by the stage that loads the model
    assert load_solver(tmp_path / "solver.pt").satnet.backward_sweeps is None
    assert load_solver(tmp_path / "solver.pt", backward_sweeps=7).satnet.backward_sweeps == 7


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError, match="m=0"):
        SATNet(10, 0)
    with pytest.raises(ValueError, match="backward_sweeps=0"):
        SATNet(10, 5, backward_sweeps=0)
    with pytest.raises(ValueError, match="backend"):
        SATNet(10, 5, backend="fortran")
    with pytest.raises(ValueError, match=r"\(B, 10\)"):
        SATNet(10, 5)(torch.zeros(2, 9), torch.zeros(2, 9))


def test_learns_4x4_sudoku():
    """The layer alone learns the rules of 4x4 Sudoku from solved examples (n = 16 cells x 4)."""
    from satground.boards.data import onehot
    from satground.boards.sudoku import generate_puzzles

    def encode(puzzles, solutions):
        puzzles, solutions = torch.as_tensor(puzzles).long(), torch.as_tensor(solutions).long()
        is_input = (puzzles > 0).repeat_interleave(4, dim=1)
        return onehot(puzzles, 4), is_input, onehot(solutions, 4), solutions

    puzzles, solutions = generate_puzzles(500, 2, seed=0)
    z, is_input, y, _ = encode(puzzles[:400], solutions[:400])
    z_test, is_input_test, _, solution_test = encode(puzzles[400:], solutions[400:])
    torch.manual_seed(0)
    layer = SATNet(64, 100, 40, max_iter=20, backend="cpu")
    optimizer = torch.optim.Adam(layer.parameters(), lr=2e-2)
    for _ in range(3):
        for idx in torch.randperm(400).split(40):
            loss = F.binary_cross_entropy(layer(z[idx], is_input[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        pred = layer(z_test, is_input_test).view(-1, 16, 4).argmax(-1) + 1
    board_accuracy = (pred == solution_test).all(dim=1).float().mean().item()
    assert board_accuracy >= 0.99


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_sweep_count_follows_eps(backend):
    """The layer counts the forward sweeps each sample ran (a training curve's `sweeps`): all
    max_iter with eps 0, fewer with a looser eps, and the count resets."""
    torch.manual_seed(0)
    z = torch.rand(3, 20)
    is_input = torch.rand(3, 20) < 0.3
    counts = {}
    for eps in (0.0, 1e-2):
        layer = SATNet(20, 16, 4, max_iter=30, eps=eps, backend=backend)
        layer.S.data.copy_(torch.randn_like(layer.S, generator=torch.Generator().manual_seed(1)))
        layer(z, is_input, generator=torch.Generator().manual_seed(2))
        counts[eps] = layer.sweep_count.mean()
        layer(z, is_input, generator=torch.Generator().manual_seed(2))
        assert layer.sweep_count.samples == 6 and layer.sweep_count.mean() == counts[eps]
        layer.sweep_count.reset()
        assert layer.sweep_count.mean() is None
    assert counts[0.0] == 30 and 1 <= counts[1e-2] < 30


def test_the_gram_matrix_is_computed_once_while_S_is_unchanged(monkeypatch):
    """A frozen S pays S S^T once, over any number of forwards; every change of S's values (an
    optimiser step, load_state_dict, a write through .data) is seen, and the outputs equal those
    of a layer that never cached."""
    from satground.satnet import layer as layer_module
    calls = []
    real = layer_module.gram
    monkeypatch.setattr(layer_module, "gram", lambda S, low=None: calls.append(1) or real(S, low))
    torch.manual_seed(0)
    layer = SATNet(10, 12, 2, backend="cpu")
    z, is_input, w = random_problem(10, 3, 0, dtype=torch.float32)

    def same_as_uncached():
        fresh = SATNet(10, 12, 2, backend="cpu")
        fresh.load_state_dict(layer.state_dict())
        with torch.no_grad():
            return torch.equal(run(layer, z, is_input), run(fresh, z, is_input))

    with torch.no_grad():
        first = run(layer, z, is_input)
        assert torch.equal(run(layer, z, is_input), first)
    assert len(calls) == 1
    optimiser = torch.optim.Adam(layer.parameters(), lr=0.1)
    (run(layer, z, is_input) * w).sum().backward()
    optimiser.step()
    assert same_as_uncached()
    layer.load_state_dict({"S": torch.randn_like(layer.S)})
    assert same_as_uncached()
    layer.S.data.copy_(torch.randn_like(layer.S))
    assert same_as_uncached()
