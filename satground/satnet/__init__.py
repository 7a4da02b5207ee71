"""The SATNet layer: `from satground.satnet import SATNet`."""
from .errors import SetupError
from .layer import BACKENDS, SATNet, check_setup, kernel_description

__all__ = ["SATNet", "BACKENDS", "SetupError", "check_setup", "kernel_description"]
