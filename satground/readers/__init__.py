"""Digit readers: the classifiers in front of SATNet that read a given cell's image.

    lenet       the LeNet digit classifier and its distillation epoch
    digitcnn    the small digit CNN and its ensemble (DigitReader): image clusterer, re-read reader
    classifier  the digit classifier's file, models/classifier.pt, and its one owner
    views       test-time views of a reader (shifted and rotated copies, averaged)
"""
