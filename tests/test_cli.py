"""The console commands: satground-exps keeps `dvc exp show` to the headline metrics and the params,
never a dep's hash; satground-profile writes the profile into the folder it runs in."""
import errno
import re
from pathlib import Path

import yaml

from satground.harness.cli import EXPS_DROP, HEADLINE, exps_command, profile
from satground.harness.params import DEFAULT_PROFILE, compose, known_keys
from satground.harness.records import read_record

REPO = Path(__file__).resolve().parents[1]


def dropped(column: str) -> bool:
    return re.match(EXPS_DROP, column) is not None  # DVC's --drop matches from the start


def test_exps_keeps_every_param_and_the_headline_metrics_and_no_dep():
    assert not any(dropped(key) for key in known_keys()), [k for k in known_keys() if dropped(k)]
    assert not any(dropped(name) for name in HEADLINE)
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    deps = {dep for stage in stages.values() for dep in stage.get("deps", [])}
    assert "dvc.yaml" in deps or any("/" in d for d in deps)
    assert all(dropped(dep) for dep in deps), [d for d in deps if not dropped(d)]
    # evaluate's other metrics, and any metric DVC prefixes with its file
    record = read_record(REPO / "results" / "cpu9_fast").metrics["evaluate"]
    assert set(HEADLINE) & set(record) == {"boards", "boards_checked", "blank_boards_checked"}
    assert all(dropped(name) for name in set(record) - set(HEADLINE))
    assert dropped("metrics/evaluate/metrics.json:boards")


def test_exps_passes_further_arguments_to_dvc():
    command = exps_command(["-A", "--sort-by", "boards_checked"])
    assert command[1:5] == ["-m", "dvc", "exp", "show"] and command[-3:] == ["-A", "--sort-by", "boards_checked"]


def test_profile_writes_params_yaml_where_it_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert profile([DEFAULT_PROFILE]) == 0
    assert yaml.safe_load((tmp_path / "params.yaml").read_text()) == compose(DEFAULT_PROFILE)
    assert profile(["laptop"]) == 1
    assert "unknown profile 'laptop'" in capsys.readouterr().err


def test_profile_keeps_the_old_params_yaml_when_the_write_fails(tmp_path, monkeypatch, capsys):
    """A full disk mid-write: one line, exit 1, the old params.yaml intact, no temporary left."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("seed: 7\n")
    real_write = Path.write_text

    def full_disk(self, text, *args, **kwargs):
        real_write(self, text[:100], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    assert profile([DEFAULT_PROFILE]) == 1
    monkeypatch.undo()
    assert "params.yaml not written (No space left on device)" in capsys.readouterr().err
    assert (tmp_path / "params.yaml").read_text() == "seed: 7\n"
    assert [p.name for p in tmp_path.iterdir()] == ["params.yaml"]
