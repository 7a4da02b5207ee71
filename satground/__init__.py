"""Symbol grounding with SATNet: library code shared by the pipeline stages.

Sub-packages by role; each one's docstring says what its modules do, one concern each:
    harness/     what every stage runs in: params, stage, io, resume, tracking, records, cli
    boards/      Visual Sudoku boards: sudoku, files, mnist, data, metrics, plots
    readers/     the digit readers in front of SATNet: lenet, digitcnn, classifier, views
    solver/      the solvers around SATNet: models, losses, grounding, training, reread, check
    satnet/      the SATNet layer (reference, C CPU and Triton GPU backends)
    clustering/  the clusterer registry and checkpoints (__init__); manifold (peers, umap,
                 spectral), selflabel (images only), infogan (the paper's); ablation (controlled
                 clustering errors for the clustering-accuracy ablation)
"""

import os
import tempfile
from pathlib import Path

__version__ = "0.1.0"


def _numba_cache_dir() -> None:
    """numba caches compiled functions beside their source; in a read-only install it would
    stop with "cannot cache function". Where that folder is not writable and NUMBA_CACHE_DIR is
    unset, point it at the user's cache (or the temporary folder). Runs before numba is imported."""
    if "NUMBA_CACHE_DIR" in os.environ or os.access(Path(__file__).parent, os.W_OK):
        return
    for folder in (Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "satground",
                   Path(tempfile.gettempdir()) / f"satground-{os.getuid()}"):
        try:
            (folder / "numba").mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder / "numba", os.W_OK):
            os.environ["NUMBA_CACHE_DIR"] = str(folder / "numba")
            return


_numba_cache_dir()


def _set_up_vector_math() -> None:
    """torch hands cos, exp, log and their kin to MKL's vector math (VML), each thread its share.
    Where a process's first such call ran on two threads at once, on an Intel Xeon (Ice Lake),
    that call came out wrong in about 2 % of processes (cos off by up to 1.5e-4), and only
    that first call (docs/reliability.md): a race in VML's set-up. One tiny call, on
    this thread alone, runs that set-up first."""
    import torch

    torch.cos(torch.zeros(1))


_set_up_vector_math()
