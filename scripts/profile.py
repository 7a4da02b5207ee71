"""Switch the parameter profile: python scripts/profile.py {default,smoke,paper}

Copies profiles/<name>.yaml over params.yaml (the file every stage reads). Then `dvc repro`, or
`dvc exp run -n <name>` to record the run as an experiment.
"""
import shutil
import sys
from pathlib import Path

PROFILES = Path(__file__).resolve().parent.parent / "profiles"


def main(argv):
    names = sorted(p.stem for p in PROFILES.glob("*.yaml"))
    if len(argv) != 1 or argv[0] not in names:
        given = argv[0] if argv else "nothing"
        print(f"error: unknown profile '{given}': choose one of {', '.join(names)}", file=sys.stderr)
        return 1
    shutil.copyfile(PROFILES / f"{argv[0]}.yaml", PROFILES.parent / "params.yaml")
    print(f"params.yaml <- profiles/{argv[0]}.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
