"""Switch the parameter profile: python scripts/profile.py NAME  (4x4, cpu9_fast, cpu9,
cpu9_rules, cpu9_paper, paper, smoke: profiles/NAME.yaml's header says what each is)

Writes params.yaml (the file every stage reads) as the defaults of satground/params.py with
profiles/NAME.yaml's changes laid over them; `4x4` is the defaults alone. The committed
params.yaml is cpu9_fast (satground.params.DEFAULT_PROFILE). Then `dvc repro`, or
`dvc exp run -n NAME` to record the run as an experiment.
"""
import sys
from pathlib import Path

from satground.io import PipelineError
from satground.params import params_text


def main(argv):
    if len(argv) != 1:
        print("usage: python scripts/profile.py NAME", file=sys.stderr)
        return 1
    try:
        text = params_text(argv[0])
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    (Path(__file__).resolve().parents[1] / "params.yaml").write_text(text)
    print(f"params.yaml <- {argv[0]} profile")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
