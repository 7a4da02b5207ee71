"""The benchmarks' own measuring pieces: the cores' peak micro-benchmark builds for each target
and times the instructions that target has (the roofline in satnet_speed.py stands on it)."""
import shutil

import pytest

from satground.satnet import cpu
from script_import import script
from test_kernel_builds import runs_here

core_peak = script("benchmarks", "core_peak")


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_core_peak_times_the_instructions_the_build_has():
    """vdpbf16ps is timed exactly where the native build has AVX512_BF16; never in the AVX2
    build; every rate is a plausible multiply-add rate (above 1 G products/s a core)."""
    native = core_peak.measure("native", threads=1, repeats=1)
    assert native["fp32 fma"] > 1e9
    assert ("bf16 vdpbf16ps" in native) == (cpu.X86 and "avx512bf16" in cpu.host_features())
    if runs_here("x86-64-v3"):
        assert not core_peak.build("x86-64-v3").dp_bf16_built()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_tile_step_times_the_kernels_own_tiles(capsys):
    """benchmarks/tile_step.py builds the kernel's tiles with its flags and times a step of
    each: tile16 exactly where the build has AVX-512 (x86-64-v4), every rate plausible."""
    script("benchmarks", "tile_step").main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("tile ")
    rows = {line.split("  ")[0].strip(): line for line in lines[1:]}
    assert ("k = 16, tile16" in rows) == runs_here("x86-64-v4")
    assert "k = 16, tile()" in rows and "k = 32, tile()" in rows
    for line in rows.values():
        assert float(line.split(" ns a step")[0].split()[-1]) > 0
        assert float(line.split(" G products/s")[0].split()[-1]) > 1


def test_gemm_precision_prints_each_gemm_and_the_whole_call(capsys):
    """benchmarks/gemm_precision.py: the three GEMMs in fp32 and bf16, their error against fp64
    (bf16's far above fp32's), and the layer's call with each."""
    gemm_precision = script("benchmarks", "gemm_precision")
    gemm_precision.main(["--batch", "2", "--sweeps", "2", "--repeats", "1", "--precision", "fp32"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "GEMM |" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| C = S S^T", "| W = U V^T", "| (W + W^T) S"]
    for row in rows:
        bf16_error, fp32_error = row.rstrip(" |").split(" | ")[-1].replace("(", "").replace(")", "").split()
        assert 1e-4 < float(bf16_error) < 2e-2 and float(fp32_error) < 1e-5
    assert "forward+backward, 2 sweeps, kernel products fp32: fp32 GEMMs" in out


def test_the_paired_rank_timing_alternates_the_two_layers(monkeypatch):
    """satnet_speed.py's `rank, paired` line: after a warm-up call of each, the k = 32 layer and
    the other rank's are called in turn, the order alternating, as many pairs as --repeats."""
    import argparse

    satnet_speed = script("benchmarks", "satnet_speed")
    calls = []
    from satground.satnet import layer as satnet_layer

    forward = satnet_layer.SATNet.forward

    def counted(self, *a, **kw):
        calls.append(self.k)
        return forward(self, *a, **kw)

    monkeypatch.setattr(satnet_layer.SATNet, "forward", counted)
    args = argparse.Namespace(batch=2, givens=36, m=60, aux=10, max_iter=2, eps=0.0, k=16,
                              repeats=4, gemm="fp32")
    out = satnet_speed.time_ranks(args)
    assert calls == [32, 16, 32, 16, 16, 32, 32, 16, 16, 32]  # warm-up, then alternating orders
    assert out["pairs"] == 4 and out["k32_s"] > 0 and out["k_s"] > 0 and out["ratio"] > 0
