"""Speed and memory of the SATNet layer at the 9x9 Sudoku size, per backend, in one run.

    python benchmarks/satnet_speed.py                 # n=729 m=600 aux=300 batch 40
    python benchmarks/satnet_speed.py --no-reference  # skip the slow pure-PyTorch oracle
    python benchmarks/satnet_speed.py --target x86-64-v3  # the AVX2 build, on any AVX2+ CPU
    python benchmarks/satnet_speed.py --precisions fp32 bf16x3 bf16  # the cpu kernel's precisions
    python benchmarks/satnet_speed.py --ranks 16 --precisions bf16  # also SDP rank k = 16
    python benchmarks/satnet_speed.py --ranks 16 --precisions bf16 --gemm auto  # the default's layer

Prints seconds per batch for forward and forward+backward (median of --repeats) and the peak
memory of forward+backward for each backend. --ranks adds the cpu backend's rows at other SDP
ranks (satnet.k; every other row is at the published k = 32), each precision at each rank, and on
a GPU the gpu backend's, with the forward+backward ratio of the k = 32 row to its twin at the
other rank; and, steadier on a shared machine, the same ratio from calls of the two ranks
alternated in one process (`rank, paired`: the median of the pairs' ratios, --repeats pairs, at
--eps and with no early stop). --gemm sets the layer's GEMMs outside the sweeps (satnet.gemm:
fp32, the published and this benchmark's default; auto, the default profile's). The published code
(locuslab/SATNet's `satnet` package, built from source: README, "The SATNet layer") runs beside ours when it is importable,
at the same settings and with the same weights S; its ratio is the "vs published" column (on a
GPU, the gpu row against the published CUDA build, satnet._cuda, where that built). The
pure-PyTorch reference needs minutes per batch at this size, so its speed-up is measured in this
same run at --reference-iters sweeps (no early stop) for both the reference and the fast
backends: time scales linearly with the sweeps, so the ratio carries over. Peak memory is the
growth of the process's peak RSS on CPU (each backend measured in a fresh subprocess), or
torch.cuda.max_memory_allocated on GPU, next to the O(B(nk + km)) and O(Bnm) sizes.

Roofline line, for each CPU run with no early stop (the --reference-iters one, and one at
--max-iter sweeps with eps 0, added when --eps is not 0), where the sweep count is exact, timed
by its best of --repeats as the GEMM is by its best of ten (on a shared machine a median against
a best is biased): the
sweeps' arithmetic, 2 f^2 k flops per sample and sweep in the forward and again in the backward,
f = free variables (blanks + aux), against a plain fp32 GEMM timed in this same run with the
same threads (torch.mm, 1024^3), and against the cores' measured peak of the instruction the
run's group products take (an fp32 FMA, or vdpbf16ps for bf16 without AMX: benchmarks/core_peak.py,
independent chains of that instruction alone): the distance to what the cores can do. Both in
products (a multiply-add is one product, two flops).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

import core_peak
from common import cpu_model, sudoku_batch


def time_backend(backend: str, args) -> dict:
    from satground.satnet import SATNet

    device = torch.device("cuda" if backend in ("gpu", "published_gpu") else "cpu")
    published = backend.startswith("published")
    _setup(device, args)
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    layer = SATNet(729, args.m, args.aux, max_iter=args.max_iter, eps=args.eps, k=args.k,
                   backend="cpu" if published else backend)
    if published:  # the same weights, in the published layer (its CUDA build on a GPU)
        import satnet
        ours, layer = layer, satnet.SATNet(729, args.m, args.aux, max_iter=args.max_iter,
                                           eps=args.eps)
        layer.S.data.copy_(ours.S.data)
    layer = layer.to(device)
    z, is_input = sudoku_batch(args.batch, args.givens, gen)
    z, is_input = z.to(device), is_input.to(device)
    if published:
        is_input = is_input.int()
    repeats = 1 if backend == "reference" else args.repeats

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    # warm-up: numba compiles (or loads its cache), Triton compiles, BLAS spins up
    out = layer(z.requires_grad_(), is_input)
    out.sum().backward()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    fwd, both = [], []
    for _ in range(repeats):
        zz = z.detach().requires_grad_()
        sync()
        t0 = time.perf_counter()
        out = layer(zz, is_input)
        sync()
        t1 = time.perf_counter()
        (out * torch.linspace(-1, 1, 729, device=device)).sum().backward()
        sync()
        t2 = time.perf_counter()
        fwd.append(t1 - t0)
        both.append(t2 - t0)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:  # ru_maxrss is in KiB on Linux; growth after the warm-up pass
        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    return {"backend": backend, "forward_s": statistics.median(fwd),
            "forward_backward_s": statistics.median(both), "forward_backward_best_s": min(both),
            "peak_mib": peak,
            "threads": torch.get_num_threads()}


def _setup(device: torch.device, args) -> None:
    """The layer's GEMMs outside the sweeps at --gemm (the kernel's precision stays the
    SATGROUND_CPU_PRECISION of the run)."""
    from satground.satnet import check_setup
    check_setup(device, None, args.gemm)


def time_ranks(args) -> dict:
    """The cpu layer at k = 32 and at --k, one call of each in turn, in one process: the same
    moments of a shared machine's load fall on both, so the ratio of each pair of calls is
    steadier than the ratio of two rows timed one after the other."""
    from satground.satnet import SATNet

    _setup(torch.device("cpu"), args)
    z, is_input = sudoku_batch(args.batch, args.givens, torch.Generator().manual_seed(0))
    weights = torch.linspace(-1, 1, 729)
    layers = {}
    for k in (32, args.k):
        torch.manual_seed(0)
        layers[k] = SATNet(729, args.m, args.aux, max_iter=args.max_iter, eps=args.eps, k=k,
                           backend="cpu")

    def call(k):
        zz = z.detach().requires_grad_()
        t0 = time.perf_counter()
        (layers[k](zz, is_input) * weights).sum().backward()
        return time.perf_counter() - t0

    for k in layers:  # warm-up: the kernel's build loads, BLAS spins up
        call(k)
    times = {32: [], args.k: []}
    for i in range(args.repeats):  # the order alternates too, so neither is always second
        for k in ((32, args.k) if i % 2 == 0 else (args.k, 32)):
            times[k].append(call(k))
    ratios = [a / b for a, b in zip(times[32], times[args.k])]
    return {"k32_s": statistics.median(times[32]), "k_s": statistics.median(times[args.k]),
            "ratio": statistics.median(ratios), "pairs": args.repeats}


def _in_a_process(one: str, settings: dict, precision: str | None) -> dict:
    """`--one one` (a backend, or `ranks`) at these settings in a fresh process, at
    SATGROUND_CPU_PRECISION `precision` where given: its JSON line."""
    cmd = [sys.executable, __file__, "--one", one] + [
        f"--{name.replace('_', '-')}={value}" for name, value in settings.items()
        if name not in ("one", "no_reference", "precisions", "ranks")]
    env = dict(os.environ, **({"SATGROUND_CPU_PRECISION": precision} if precision else {}))
    line = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(line.strip().splitlines()[-1])


def gemm_gflops(size: int = 1024, repeats: int = 10) -> float:
    """fp32 rate of a plain square GEMM on this machine, this thread count (best of repeats)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def sweep_flops(args, sweeps: int, k: int) -> float:
    """Flops of forward + backward sweeps for the batch: 2 f^2 k per sample, sweep and pass."""
    free = 729 - 9 * args.givens + args.aux
    return 2 * (2 * free * free * k) * sweeps * args.batch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--givens", type=int, default=36)
    parser.add_argument("--m", type=int, default=600)
    parser.add_argument("--aux", type=int, default=300)
    parser.add_argument("--max-iter", type=int, default=40)
    parser.add_argument("--eps", type=float, default=1e-4,
                        help="forward stopping rule; 0 runs all max_iter sweeps")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--reference-iters", type=int, default=3,
                        help="sweeps of the speed-up comparison with the reference")
    parser.add_argument("--target", default=os.environ.get("SATGROUND_CPU_TARGET", "native"),
                        help="the cpu kernel's build: native, or an -march value such as "
                             "x86-64-v3 (sets SATGROUND_CPU_TARGET)")
    parser.add_argument("--precisions", nargs="+", default=[], choices=["fp32", "bf16x3", "bf16"],
                        help="also time the cpu backend at each SATGROUND_CPU_PRECISION (rows "
                             "'cpu <precision>'; one this build lacks is left out)")
    parser.add_argument("--ranks", nargs="+", type=int, default=[],
                        help="also time the cpu backend at these SDP ranks k (rows 'cpu k=16'; "
                             "each --precisions too), against its k = 32 twin")
    parser.add_argument("--gemm", default="fp32", choices=["fp32", "bf16", "auto"],
                        help="the layer's GEMMs outside the sweeps (satnet.gemm): fp32, the "
                             "published; auto, the default profile's (bf16 where the kernel "
                             "takes bf16 products)")
    parser.add_argument("--k", type=int, default=32, help=argparse.SUPPRESS)  # internal: --one's rank
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: time one backend, print JSON
    args = parser.parse_args()
    os.environ["SATGROUND_CPU_TARGET"] = args.target

    if args.one:
        print(json.dumps(time_ranks(args) if args.one == "ranks" else time_backend(args.one, args)))
        return

    gpu = torch.cuda.is_available()
    fast = ["cpu"] + ["gpu"] * gpu
    published = importlib.util.find_spec("satnet") is not None
    published_gpu = published and gpu and importlib.util.find_spec("satnet._cuda") is not None
    from satground.satnet import cpu
    available = {"fp32": True, "bf16x3": cpu.bf16x3_available(), "bf16": cpu.bf16_available()}
    precisions = [None] + [p for p in args.precisions if available[p]]
    ranks = [32] + [k for k in args.ranks if k != 32]
    runs = [(b, args.max_iter, args.eps, None, 32)
            for b in fast + ["published"] * published + ["published_gpu"] * published_gpu]
    runs += [("cpu", args.max_iter, args.eps, p, 32) for p in precisions[1:]]
    runs += [("cpu", args.max_iter, args.eps, p, k) for k in ranks[1:] for p in precisions]
    runs += [("gpu", args.max_iter, args.eps, None, k) for k in ranks[1:] if gpu]
    if args.eps:  # the roofline needs an exact sweep count: each precision again, no early stop
        runs += [("cpu", args.max_iter, 0.0, p, k) for k in ranks for p in precisions]
    if not args.no_reference:  # the speed-up comparison, all at the same few sweeps
        runs += [(b, args.reference_iters, 0.0, None, 32) for b in fast + ["reference"]]
    n_vars = 729 + 1 + args.aux
    k = 32
    print(f"SATNet n=729 m={args.m} aux={args.aux} batch={args.batch} givens={args.givens} "
          f"max_iter={args.max_iter} eps={args.eps} k={k} (rows marked k=16 etc.: that rank); "
          f"GEMMs outside the sweeps: {args.gemm}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"CPU: {cpu_model()}; cpu kernel: --target {args.target}, tile "
          f"{cpu.tile_shape(torch.float32)}"
          + (", AMX bf16x3" if cpu.bf16x3_available() and
             os.environ.get("SATGROUND_CPU_PRECISION", "bf16x3") == "bf16x3" else ""))
    # the peaks are best-of figures: measured before and after the runs, the better kept, so
    # that a moment of a shared machine's noise does not set the roofline
    first_peaks = core_peak.measure(args.target, torch.get_num_threads(), repeats=5)
    results = []
    for backend, max_iter, eps, precision, rank in runs:
        # a fresh process per run, so the peak-RSS growth is that backend's alone
        settings = dict(vars(args), max_iter=max_iter, eps=eps, k=rank)
        result = dict(_in_a_process(backend, settings, precision), sweeps=max_iter, eps=eps,
                      k=rank, precision=precision)
        if precision:
            result["backend"] = f"cpu {precision}"
        if rank != 32:
            result["backend"] += f" k={rank}"
        results.append(result)
    paired = []  # each other rank against k = 32, calls alternated in one process
    for k in ranks[1:]:
        for precision in precisions:
            for eps in dict.fromkeys([args.eps, 0.0]):
                result = _in_a_process("ranks", dict(vars(args), eps=eps, k=k), precision)
                paired.append(dict(result, k=k, eps=eps,
                                   backend="cpu" + (f" {precision}" if precision else "")))
    reference = next((r for r in results if r["backend"] == "reference"), None)
    # each fast backend against the published build on its own device
    published_runs = {(r["backend"], r["sweeps"], r["eps"]): r for r in results
                      if r["backend"].startswith("published")}
    small = args.batch * (n_vars * k + k * args.m) * 4 / 2**20
    large = args.batch * n_vars * args.m * 4 / 2**20
    print(f"{'backend':<18} {'sweeps':>11} {'forward s':>10} {'fwd+bwd s':>10} "
          f"{'vs reference':>12} {'vs published':>12} {'peak MiB':>9}")
    for r in results:
        same = reference and r["sweeps"] == reference["sweeps"]
        speedup = (f"{reference['forward_backward_s'] / r['forward_backward_s']:.1f}x"
                   if same else "-")
        twin = {"cpu": "published", "gpu": "published_gpu"}.get(r["backend"].split()[0])
        pub = published_runs.get((twin, r["sweeps"], r["eps"]))
        vs_published = (f"{pub['forward_backward_s'] / r['forward_backward_s']:.1f}x"
                        if pub else "-")
        sweeps = f"{r['sweeps']}" + (f" eps {r['eps']:g}" if r["eps"] else "")
        print(f"{r['backend']:<18} {sweeps:>11} {r['forward_s']:10.3f} "
              f"{r['forward_backward_s']:10.3f} {speedup:>12} {vs_published:>12} "
              f"{r['peak_mib']:9.1f}")
    by_setting = {(r["backend"], r["precision"], r["sweeps"], r["eps"], r["k"]): r for r in results}
    for r in results:  # each other rank against its k = 32 twin: same precision, sweeps, eps
        twin = by_setting.get((r["backend"].split(" k=")[0], r["precision"], r["sweeps"], r["eps"], 32))
        if r["k"] != 32 and twin:
            print(f"rank: {r['backend']} ({r['sweeps']} sweeps, eps {r['eps']:g}) runs "
                  f"{twin['forward_backward_s'] / r['forward_backward_s']:.2f}x the k=32 "
                  f"forward+backward's speed (k=32 {twin['forward_backward_s']:.3f} s, "
                  f"k={r['k']} {r['forward_backward_s']:.3f} s)")
    for r in paired:
        print(f"rank, paired: {r['backend']} k={r['k']} ({args.max_iter} sweeps, eps {r['eps']:g}) "
              f"runs {r['ratio']:.2f}x the k=32 forward+backward's speed (median of {r['pairs']} "
              f"pairs of calls alternated in one process; medians k=32 {r['k32_s']:.3f} s, "
              f"k={r['k']} {r['k_s']:.3f} s)")
    if not published:
        print("published code (locuslab/SATNet's satnet package) not importable: no ratio")
    elif gpu and not published_gpu:
        print("the published package has no CUDA build (satnet._cuda): no GPU ratio")
    if gpu:
        print(f"GPU: {torch.cuda.get_device_name()}")
    print(f"memory scale: B(Nk + km) floats = {small:.1f} MiB; B N m floats = {large:.1f} MiB")
    gemm = gemm_gflops()
    cores = {name: max(rate, first_peaks[name]) for name, rate in
             core_peak.measure(args.target, torch.get_num_threads(), repeats=5).items()}
    print("core peak (benchmarks/core_peak.py, " + f"{torch.get_num_threads()} threads): "
          + ", ".join(f"{name} {rate / 1e9:.1f} G products/s" for name, rate in cores.items()))
    amx = cpu.bf16x3_available()
    for r in results:  # runs with no early stop: the sweep count, hence the arithmetic, is exact
        if r["eps"] == 0 and r["backend"].startswith("cpu"):
            precision = r["precision"] or os.environ.get("SATGROUND_CPU_PRECISION", "bf16x3")
            # the instruction the group products run on, and its measured peak (none for AMX)
            if amx and precision != "fp32":
                instruction, peak = "AMX tiles", None
            elif precision == "bf16":
                instruction, peak = "bf16 vdpbf16ps", cores.get("bf16 vdpbf16ps")
            else:
                instruction, peak = "fp32 fma", cores["fp32 fma"]
            flops = sweep_flops(args, r["sweeps"], r["k"])
            rate = flops / r["forward_backward_best_s"] / 1e9  # best against best, as the peaks
            against = (f"{100 * rate / 2 / (peak / 1e9):.0f} % of the cores' {instruction} peak "
                       f"({peak / 1e9:.1f} G products/s), " if peak else f"{instruction}: no "
                       "micro-benchmark; ")
            print(f"roofline ({r['backend']}, {r['sweeps']} sweeps fwd+bwd, best of "
                  f"{args.repeats}, per-call overheads included): {flops / 2e9:.2f} G products "
                  f"per batch, {rate / 2:.1f} G products/s = {against}"
                  f"{100 * rate / gemm:.0f} % of a plain fp32 GEMM here ({gemm / 2:.1f} G "
                  f"products/s, torch.mm 1024^3)")


if __name__ == "__main__":
    main()
