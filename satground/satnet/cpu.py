"""CPU backend: one compiled pass per sample over its free variables only (C, mixing.c).

Each update needs g_i = sum_{j != i} C_ij v_j with C = S S^T. A sample's fixed variables (truth,
given cells: about a third of a 9x9 board) never change, so their part of every g_i,
F_i = sum_{j fixed} C_ij v_j, is computed once per call; the sweeps then work on the sample's
free rows of C and its free vectors only, which at the 9x9 size halves the arithmetic of a
sweep over all variables.

Within a sweep, rows are taken in groups: the group's g's are first computed from the vectors
as they stand, by a tiled product at GEMM speed, then each row is updated in turn and its change
pushed into the g's of the group's later rows, exactly as the sequential order requires.
Variables are visited in the reference's order, so results agree with it up to float rounding.
The product runs on one of two tiles:

- the vector tile (float32 and float64): TROWS rows x TVECS vectors of running sums, sized to the
  target's register file as BLIS sizes its micro-kernels, chosen at compile time from the
  compiler's ISA macros: AVX-512 12 x 2 zmm, AVX2/FMA 6 x 2 ymm, AArch64 NEON 8 x 3 q registers,
  SSE 4 x 2 xmm, and a portable 4 x 2 of the compiler's generic vectors for anything else; the
  group's rows of C are broadcast from a packed panel, each vector streamed once per group
  (`tile_shape()` names the one built); at k = 16 on AVX-512 (one vector of X a step) the rows
  are broadcast in pairs against X's columns each doubled, the same sums (tile16);
- AMX tiles (float32, k padded to 16 or 32, CPUs with AMX-BF16, e.g. Sapphire Rapids Xeons): 16 rows, each
  fp32 operand split into two bfloat16 numbers (hi + lo, 16 significant bits together) and every
  product taken as hi*hi + hi*lo + lo*hi with fp32 sums ("bf16x3"): less accurate than the fp32
  tile, within the tests' tolerance against the reference, and faster (docs/satnet-layer.md).
  precision fp32 (the stages' `satnet.precision`, or SATGROUND_CPU_PRECISION) keeps the vector
  tile everywhere;
- plain bf16 products (precision bf16, float32, k padded to 16 or 32): hi*hi alone with fp32
  sums, on the AMX tiles, or where the build has AVX512_BF16 but no AMX (AMD Zen 4 and 5) on a
  vdpbf16ps tile (8 rows x 2 vectors at k = 32, 16 x 1 at 16; twice an fp32 FMA's products per
  instruction, though some Intel cores issue it at half the FMA's rate: docs/satnet-layer.md). About 2^-8
  relative per product: selectable, never the default, refused where neither is built.

The batch is split over torch's thread count, one whole sample per task, by one call into the
kernel per pass (its own threads; ctypes releases the GIL meanwhile), and no BLAS call runs while
they do (numba's and torch's thread pools switching every block is slow; docs/satnet-layer.md).

Why C rather than numba: numba's vectoriser kept its tile at 256 bits and could not hold a tile
of vector accumulators in registers, so it ran at about a third of a GEMM's rate. The source is
compiled with the system's C compiler (`cc`, or $CC) at first use, for this CPU (-march=native,
or -mcpu=native off x86) or for the target SATGROUND_CPU_TARGET names (an x86-64 level such as
x86-64-v3, to run the AVX2 build on an AVX-512 machine), and cached under __pycache__ as numba
caches: no build step at install, and a tree moved to another machine recompiles rather than
run foreign instructions.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
from pathlib import Path

import llvmlite.binding
import torch

from .errors import SetupError

SOURCE = Path(__file__).with_name("mixing.c")
# reassociation lets the row updates' dot products vectorise (as numba's fastmath did); nothing
# assumes finite values, so a degenerate sample still shows up as non-finite
CFLAGS = ["-O3", "-std=gnu11", "-shared", "-fPIC", "-pthread", "-fno-math-errno", "-fassociative-math",
          "-fno-signed-zeros", "-fno-trapping-math"]
# x86 only: lets the element-wise loops use 512-bit vectors where the target has them
X86_FLAGS = ["-mprefer-vector-width=512"]
REAL = {torch.float32: "float", torch.float64: "double"}
PRECISIONS = {"fp32": 0, "bf16x3": 1, "bf16": 2}  # name -> the code mixing.c takes
# what each x86-64 level needs of the host (llvmlite's feature names), so that a build this CPU
# cannot run is refused with a line rather than killing the process with SIGILL
X86_LEVELS = {
    "x86-64": (),
    "x86-64-v2": ("sse4.2", "ssse3", "popcnt", "cx16"),
    "x86-64-v3": ("sse4.2", "ssse3", "popcnt", "cx16", "avx", "avx2", "fma", "bmi", "bmi2",
                  "f16c", "lzcnt", "movbe"),
    "x86-64-v4": ("sse4.2", "ssse3", "popcnt", "cx16", "avx", "avx2", "fma", "bmi", "bmi2",
                  "f16c", "lzcnt", "movbe", "avx512f", "avx512bw", "avx512cd", "avx512dq",
                  "avx512vl"),
}
X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")


def host_features() -> set[str]:
    """This CPU's features, by llvmlite's names (avx2, avx512f, ...)."""
    return {name for name, on in llvmlite.binding.get_host_cpu_features().items() if on}


def target() -> str:
    """SATGROUND_CPU_TARGET: `native` (the default: this CPU) or a compiler -march value; an
    x86-64 level this CPU lacks is refused here, before anything is compiled or loaded."""
    value = os.environ.get("SATGROUND_CPU_TARGET", "native").strip() or "native"
    missing = [f for f in X86_LEVELS.get(value, ()) if f not in host_features()]
    if missing:
        raise SetupError(f"SATGROUND_CPU_TARGET={value}: this CPU lacks {', '.join(missing)}; "
                           f"use native or a lower level")
    return value


def compiler() -> list[str]:
    """The C compiler's command: $CC, split as a shell would, else cc."""
    return shlex.split(os.environ.get("CC", "cc"))


def compile_flags(dtype: torch.dtype, march: str) -> list[str]:
    """The compiler flags of the kernel for this dtype and target."""
    if march == "native" and not X86:  # AArch64 and others: -mcpu is the portable spelling
        arch = ["-mcpu=native"]
    else:
        arch = [f"-march={march}"]
    return CFLAGS + arch + (X86_FLAGS if X86 else []) + (["-DDOUBLE"] if dtype == torch.float64
                                                         else [])


def _cache_dir() -> Path:
    """__pycache__ beside the source, or the user's cache when the package is read-only."""
    for path in (SOURCE.parent / "__pycache__",
                 Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "satground"):
        try:
            path.mkdir(parents=True, exist_ok=True)
            if os.access(path, os.W_OK):
                return path
        except OSError:
            continue
    return Path(tempfile.gettempdir())


def _library(dtype: torch.dtype) -> ctypes.CDLL:
    """mixing.c compiled for this dtype and SATGROUND_CPU_TARGET (cached on disk, then loaded
    once per dtype and target)."""
    return _build(dtype, target())


@functools.cache
def _build(dtype: torch.dtype, march: str) -> ctypes.CDLL:
    cc = compiler()
    flags = compile_flags(dtype, march)
    host = llvmlite.binding.get_host_cpu_name() + llvmlite.binding.get_host_cpu_features().flatten()
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *cc, *flags, host]).encode())
    target_path = _cache_dir() / f"mixing_{REAL[dtype]}_{key.hexdigest()[:16]}.so"
    if not target_path.exists():
        # compile beside the target and rename: concurrent first uses never load half a file
        fd, partial = tempfile.mkstemp(suffix=".so", dir=target_path.parent)
        os.close(fd)
        try:
            done = subprocess.run([*cc, *flags, "-o", partial, str(SOURCE), "-lm"],
                                  capture_output=True, text=True)
            if done.returncode:
                first = (done.stderr.strip().splitlines() or ["no output"])[0]
                raise SetupError(f"SATNet cpu backend: compiling {SOURCE} with {cc[0]} failed "
                                   f"({first}); install a C compiler or use backend='reference'")
            os.replace(partial, target_path)
        except FileNotFoundError:
            raise SetupError(f"SATNet cpu backend: no C compiler {cc[0]!r} to build {SOURCE} "
                               f"(set CC, or use backend='reference')") from None
        finally:
            if os.path.exists(partial):
                os.remove(partial)
    lib = ctypes.CDLL(str(target_path))
    real, ptr, i32 = (ctypes.c_float if dtype == torch.float32 else ctypes.c_double,
                      ctypes.c_void_p, ctypes.c_int)
    lib.mix_forward.argtypes = [ptr, i32, i32, ptr, ptr, i32, ptr, i32, real, ptr, ptr, i32, i32]
    lib.mix_backward.argtypes = [ptr, i32, i32, ptr, ptr, i32, ptr, ptr, ptr, ptr, real, ptr, i32,
                                 i32]
    lib.mix_forward.restype = lib.mix_backward.restype = i32
    lib.bf16x3_available.restype = lib.bf16_available.restype = i32
    lib.products_taken.argtypes = [i32, i32]
    lib.products_taken.restype = i32
    lib.tile_shape.restype = ctypes.c_char_p
    return lib


def tile_shape(dtype: torch.dtype = torch.float32) -> str:
    """The vector tile of the build this process runs, e.g. "avx2 6x2 vectors of 32 bytes"."""
    return _library(dtype).tile_shape().decode()


def bf16x3_available() -> bool:
    """Whether float32 sweeps run on this CPU's AMX tiles (bf16x3) when allowed."""
    return bool(_library(torch.float32).bf16x3_available())


def bf16_available() -> bool:
    """Whether float32 sweeps can take plain bf16 products here: AMX tiles, or AVX512_BF16
    (vdpbf16ps) in the build for SATGROUND_CPU_TARGET."""
    return bool(_library(torch.float32).bf16_available())


_selected: str | None = None  # a stage's satnet.precision (check_setup); else the variable


def _precision() -> int:
    """The precision as mixing.c's code: a stage's `satnet.precision`, else
    SATGROUND_CPU_PRECISION (library use, benchmarks). bf16x3 (the default: AMX tiles where the
    CPU has them, for k padded to 16 or 32; elsewhere, and for float64, the fp32/fp64 vector
    tile), fp32 (that tile always) or bf16 (one bf16 product per term, fp32 sums: AMX tiles or
    AVX512_BF16's vdpbf16ps, for k padded to 16 or 32; refused where the build has neither). bf16 is about 2^-8 relative per
    product: docs/satnet-layer.md says where learning was measured with it. auto: bf16 where
    built, else bf16x3 (precision_name)."""
    return PRECISIONS[precision_name()]


def precision_name() -> str:
    """The precision the kernel runs here, by name, with `auto` resolved: bf16 where this build
    has AMX-BF16 or AVX512_BF16, else bf16x3 (so a profile that wants bf16's speed still runs,
    at the fp32 tile's, on a CPU without them). Checked: one line naming the setting."""
    name = "satnet.precision" if _selected else "SATGROUND_CPU_PRECISION"
    value = _selected or os.environ.get("SATGROUND_CPU_PRECISION", "bf16x3")
    if value not in (*PRECISIONS, "auto"):
        raise SetupError(f"{name} must be one of {(*PRECISIONS, 'auto')}, got {value!r}")
    if value == "auto":
        return "bf16" if bf16_available() else "bf16x3"
    if value == "bf16" and not bf16_available():
        raise SetupError(f"{name} bf16: the kernel built for SATGROUND_CPU_TARGET={target()} has "
                         f"neither AMX-BF16 nor AVX512_BF16 here; use auto, bf16x3 or fp32")
    return value


def products(k: int) -> str:
    """The products the float32 sweeps take at rank k here, by name, as mixing.c decides them
    (`products_taken`): the precision (precision_name) where its tiles run, else fp32, the vector
    tile's. The bf16 tiles take k padded to 16 or 32, and bf16x3 runs on AMX alone."""
    code = _library(torch.float32).products_taken(k, _precision())
    return next(name for name, value in PRECISIONS.items() if value == code)


def check_setup(precision: str | None = None) -> None:
    """Everything the kernel needs from this machine, checked now rather than at the first
    batch: the precision (a stage's `satnet.precision`, kept for the process, or the
    SATGROUND_CPU_* variables) and a working compiler (builds the float32 kernel)."""
    global _selected
    _library(torch.float32)
    _selected = precision
    _precision()


def _threads(batch: int) -> int:
    """The kernel's threads for a batch: torch's thread count, at most one per sample."""
    return max(1, min(torch.get_num_threads(), batch))


def _checked(status: int) -> None:
    if status < 0:
        raise MemoryError("SATNet cpu backend: out of memory for a sample's sweeps")


def mix_forward(C, V, free, order, max_iter, eps):
    B, N, k = V.shape
    V, free = V.contiguous().clone(), free.contiguous()
    gnrm = torch.zeros(B, N, dtype=V.dtype)
    iters = torch.zeros(B, dtype=torch.int32)
    C, order = C.contiguous(), order.contiguous()  # visited in `order`: nothing is permuted
    lib, precision = _library(V.dtype), _precision()
    _checked(lib.mix_forward(C.data_ptr(), N, k, order.data_ptr(), free.data_ptr(), B,
                             V.data_ptr(), int(max_iter), eps, gnrm.data_ptr(), iters.data_ptr(),
                             precision, _threads(B)))
    return V, gnrm, iters.long()


def mix_backward(C, V, gnrm, free, order, iters, prox_lam, a):
    B, N, k = V.shape
    C, V, gnrm, free, a, order = (x.contiguous() for x in (C, V, gnrm, free, a, order))
    U = torch.zeros_like(V)
    sweeps = iters.to(torch.int32).contiguous()
    lib, precision = _library(V.dtype), _precision()
    _checked(lib.mix_backward(C.data_ptr(), N, k, order.data_ptr(), free.data_ptr(), B,
                              V.data_ptr(), gnrm.data_ptr(), a.data_ptr(), sweeps.data_ptr(),
                              prox_lam, U.data_ptr(), precision, _threads(B)))
    return U
