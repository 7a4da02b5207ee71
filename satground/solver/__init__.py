"""The Sudoku solvers around SATNet: models, their losses and training, the grounding of their
outputs, and what SATNet does with the readings once trained.

    models     the visual SATNet solver, the non-visual one, the proofreader
    losses     the Symbol Grounding Loss (the ground stage)
    grounding  soft/hard permutation extraction and folding it into the classifier
    training   the BCE loss, the training loop (with early stopping) and board predictions
    reread     SATNet's votes on the training givens and the new reader
    check      SATNet's check of a test board's readings (evaluate)
"""
