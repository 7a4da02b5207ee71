"""`python stages/X.py --help` says what the stage reads and writes, and which parameters it
reads with their defaults and meanings (from dvc.yaml's declarations and the schema)."""
import subprocess
import sys

import pytest
import yaml

from satground.harness.params import describe
from stage_commands import REPO

STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


@pytest.mark.parametrize("name", sorted(STAGES))
def test_a_stage_help_lists_its_paths_and_the_parameters_it_reads(name):
    words = STAGES[name]["cmd"].split()
    result = subprocess.run([sys.executable, words[1], "--help"], cwd=REPO, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # argparse wraps lines
    for flag, path in zip(words[2::2], words[3::2]):
        if flag == "--view":  # baseline_visual's board choice, not a path
            continue
        role = "written" if flag.endswith("-out") else "read"
        assert f"{flag} PATH {role}; dvc.yaml: " in text and path in text, (flag, text)
    for key in STAGES[name].get("params", []):
        for line in describe(key):
            assert " ".join(line.split()) in text, line


def test_describe_names_a_key_that_is_not_a_parameter():
    from satground.harness.io import PipelineError

    assert describe("train.epochs")[0].startswith("train.epochs (10): ")
    assert [line.split(" ")[0] for line in describe("data.givens")] == ["data.givens.mean", "data.givens.std"]
    with pytest.raises(PipelineError, match="train.epoch: not a parameter"):
        describe("train.epoch")


def test_a_stage_help_shows_the_default_runs_values():
    """One default: what --help shows is what `dvc repro` on the committed params.yaml runs."""
    result = subprocess.run([sys.executable, "stages/train.py", "--help"], cwd=REPO, capture_output=True, text=True)
    committed = yaml.safe_load((REPO / "params.yaml").read_text())
    text = " ".join(result.stdout.split())
    assert committed["satnet"]["m"] == 600 and "satnet.m (600): " in text
    assert f"train.epochs ({committed['train']['epochs']}): " in text
