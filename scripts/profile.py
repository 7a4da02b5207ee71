"""Switch the parameter profile: python scripts/profile.py NAME  (cpu9_fast, the default,
or one of profiles/*.yaml, whose header says what each is)

Writes params.yaml (the file every stage reads) as the defaults of satground/harness/params.py with
profiles/NAME.yaml's changes laid over them (`cpu9_fast`, the default, has no file). The committed
params.yaml is cpu9_fast (satground.harness.params.DEFAULT_PROFILE). Then `dvc repro`, or
`dvc exp run -n NAME` to record the run as an experiment.
"""
import os
import sys
from pathlib import Path

from satground.harness.cli import profile

if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parents[1])  # params.yaml of this checkout, wherever run from
    sys.exit(profile())
