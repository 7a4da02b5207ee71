"""The CPU kernel built for each instruction set: every build this host can run against the
reference (values and gradients, float32 and float64), the portable tile and an AArch64 cross
build through tests/kernel_check.c (its own plain loops), the latter under qemu-user where
installed. Which tile a build runs is asserted, so a build that silently fell back to another
tile fails."""
import platform
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from satground.satnet import cpu
from test_satnet import layer_pair, random_problem, value_and_grads

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "tests" / "kernel_check.c"
X86 = platform.machine().lower() in ("x86_64", "amd64")
# the tile each x86-64 level must get (mixing.c's choice from the compiler's macros)
LEVEL_TILES = {"x86-64-v2": "sse 4x2", "x86-64-v3": "avx2 6x2", "x86-64-v4": "avx512 12x2"}


def runs_here(level: str) -> bool:
    return X86 and all(f in cpu.host_features() for f in cpu.X86_LEVELS[level])


@pytest.mark.parametrize("level", list(LEVEL_TILES))
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-3), (torch.float64, 1e-10)])
def test_each_x86_level_matches_the_reference(level, dtype, tol, monkeypatch):
    if not runs_here(level):
        pytest.skip(f"this CPU cannot run {level} code")
    monkeypatch.setenv("SATGROUND_CPU_TARGET", level)
    monkeypatch.setenv("SATGROUND_CPU_PRECISION", "fp32")  # the vector tile, also on AMX CPUs
    assert cpu.tile_shape(dtype).startswith(LEVEL_TILES[level])
    # k=32: whole tiles; k=6: a column remainder; 70 free rows: a partial group at every size
    for k in (32, 6):
        ref, layer = layer_pair("cpu", 90, 60, 20, dtype, max_iter=25, k=k)
        z, is_input, w = random_problem(90, 3, k, dtype)
        for a, b in zip(value_and_grads(ref, z, is_input, w),
                        value_and_grads(layer, z, is_input, w)):
            assert torch.allclose(a, b, atol=tol * max(1.0, a.abs().max().item()), rtol=0)


def test_a_level_this_cpu_lacks_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(cpu, "host_features", lambda: {"sse4.2", "ssse3", "popcnt", "cx16"})
    monkeypatch.setenv("SATGROUND_CPU_TARGET", "x86-64-v3")
    with pytest.raises(RuntimeError, match=r"SATGROUND_CPU_TARGET=x86-64-v3: this CPU lacks avx"):
        cpu.target()


def compile_and_run(compiler: list[str], flags: list[str], tmp_path: Path, runner=()):
    exe = tmp_path / "kernel_check"
    done = subprocess.run([*compiler, "-O3", "-std=gnu11", "-Wall", "-Wextra", "-Werror", *flags,
                           "-o", str(exe), str(CHECK), "-lm", "-pthread"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = subprocess.run([*runner, str(exe)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize("double", [False, True])
def test_portable_tile_matches_plain_loops(double, tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    out = compile_and_run(["cc"], ["-DMIXING_PORTABLE"] + ["-DDOUBLE"] * double, tmp_path)
    assert "tile: portable 4x2" in out and ": ok" in out


def test_kernel_check_fails_a_wrong_kernel(tmp_path):
    """The harness can fail: the same check over a kernel that drops one in-group update."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    source = (ROOT / "satground" / "satnet" / "mixing.c").read_text()
    broken = source.replace("for (int p = r + 1; p < rows; p++) {",
                            "for (int p = r + 2; p < rows; p++) {")
    assert broken != source
    (tmp_path / "satground" / "satnet").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "satground" / "satnet" / "mixing.c").write_text(broken)
    shutil.copy(CHECK, tmp_path / "tests")
    exe = tmp_path / "check"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(tmp_path / "tests" / CHECK.name), "-lm", "-pthread"],
                   check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 1 and "FAILED" in out.stdout


def test_vector_bf16_conversion_matches_the_scalar_one(tmp_path):
    """AMX and vdpbf16ps builds round C and the vectors to bf16 sixteen at a time
    (vcvtneps2bf16, masked loads and stores into the pair layout): bit for bit the scalar
    rounding at each vector's column, hi and lo parts, both row parities and the padding,
    checked in tests/kernel_check.c."""
    if shutil.which("cc") is None or not (X86 and {"avx512bf16", "avx512bw"} <= cpu.host_features()):
        pytest.skip("needs a C compiler and a CPU with AVX512_BF16")
    out = compile_and_run(["cc"], ["-march=native"], tmp_path)
    assert "bf16 conversion, vector against scalar: ok" in out and ": ok" in out


def test_the_k16_avx512_tile_takes_the_same_bits_as_the_generic_one(tmp_path):
    """mixing.c's tile16 (kp = 16 on AVX-512, float32: its rows broadcast in pairs, X doubled)
    against tile() at one vector, bit for bit, in tests/kernel_check.c; and the whole kernel
    against the plain loops at k = 16 there."""
    if shutil.which("cc") is None or not runs_here("x86-64-v4"):
        pytest.skip("needs a C compiler and an x86-64-v4 (AVX-512) CPU")
    out = compile_and_run(["cc"], ["-march=x86-64-v4"], tmp_path)
    assert "tile: avx512 12x2" in out and "k=16 sweeps=4" in out
    assert "tile16 against tile(), bit for bit: ok" in out and ": FAILED" not in out


AARCH64_CC = "aarch64-linux-gnu-gcc"


@pytest.mark.parametrize("double", [False, True])
def test_aarch64_cross_build_compiles_without_warnings(double, tmp_path):
    if shutil.which(AARCH64_CC) is None:
        pytest.skip(f"{AARCH64_CC} not installed (Debian gcc-aarch64-linux-gnu; .ci/run has it)")
    flags = cpu.CFLAGS + ["-mcpu=neoverse-v1", "-Wall", "-Wextra", "-Werror"]
    done = subprocess.run([AARCH64_CC, *flags, *["-DDOUBLE"] * double, "-o",
                           str(tmp_path / "mixing.so"), str(cpu.SOURCE), "-lm", "-pthread"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert b"neon 8x3" in (tmp_path / "mixing.so").read_bytes()


@pytest.mark.parametrize("double", [False, True])
def test_aarch64_neon_tile_matches_plain_loops_under_qemu(double, tmp_path):
    if shutil.which(AARCH64_CC) is None or shutil.which("qemu-aarch64") is None:
        pytest.skip("needs gcc-aarch64-linux-gnu and qemu-user (Debian; .ci/run has them)")
    out = compile_and_run([AARCH64_CC], ["-static", "-march=armv8-a"] + ["-DDOUBLE"] * double,
                          tmp_path, runner=["qemu-aarch64"])
    assert "tile: neon 8x3" in out and ": ok" in out
