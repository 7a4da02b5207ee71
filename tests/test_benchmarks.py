"""The benchmarks' own measuring pieces: the cores' peak micro-benchmark builds for each target
and times the instructions that target has (the roofline in satnet_speed.py stands on it)."""
import shutil
import sys
from pathlib import Path

import pytest

from satground.satnet import cpu
from test_kernel_builds import runs_here

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import core_peak  # noqa: E402


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_core_peak_times_the_instructions_the_build_has():
    """vdpbf16ps is timed exactly where the native build has AVX512_BF16; never in the AVX2
    build; every rate is a plausible multiply-add rate (above 1 G products/s a core)."""
    native = core_peak.measure("native", threads=1, repeats=1)
    assert native["fp32 fma"] > 1e9
    assert ("bf16 vdpbf16ps" in native) == (cpu.X86 and "avx512bf16" in cpu.host_features())
    if runs_here("x86-64-v3"):
        assert not core_peak.build("x86-64-v3").dp_bf16_built()
