"""Switch the parameter profile: python scripts/profile.py NAME  (4x4, cpu9_fast, cpu9,
cpu9_rules, cpu9_paper, paper, smoke: profiles/NAME.yaml's header says what each is)

Writes params.yaml (the file every stage reads) as the defaults of satground/harness/params.py with
profiles/NAME.yaml's changes laid over them; `4x4` is the defaults alone. The committed
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
