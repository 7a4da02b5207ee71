"""SATNet's errors, in a module of their own: the layer raises NonFiniteError, the CPU backend
SetupError, and the layer imports the backend, so the backend cannot import them from the layer
without a circle. Both stay importable from satground.satnet.layer; SetupError also from
satground.satnet.
"""


class NonFiniteError(ValueError):
    """SATNet's forward met a NaN/inf in z, S or its outputs (a ValueError: catch either)."""


class SetupError(RuntimeError):
    """A backend cannot run as this machine is set up: no or a failing C compiler, a bad
    SATGROUND_CPU_* setting. One line naming the setting or the tool; `user_facing`, so a
    pipeline stage prints it as one line."""

    user_facing = True
