"""The SATNet layer: `from satground.satnet import SATNet`."""
from .layer import BACKENDS, SATNet, SetupError, check_setup, kernel_description

__all__ = ["SATNet", "BACKENDS", "SetupError", "check_setup", "kernel_description"]
