"""The SATNet layer: `from satground.satnet import SATNet`."""
from .layer import BACKENDS, SATNet

__all__ = ["SATNet", "BACKENDS"]
