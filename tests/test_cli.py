"""The console commands: satground-exps keeps `dvc exp show` to the headline metrics and the params,
never a dep's hash; satground-profile writes the profile into the folder it runs in."""
import errno
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import yaml

from satground.harness.cli import EXPS_DROP, EXPS_KEEP, HEADLINE, exps_command, profile
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


def test_exps_shows_the_headline_metrics_even_where_no_run_differs():
    """--only-changed drops a column whose value every row shares (a fresh clone's workspace
    and HEAD): --keep holds the headline metrics, and only them."""
    command = exps_command([])
    assert command[command.index("--keep") + 1] == EXPS_KEEP
    kept = [name for name in ("boards", "boards_checked", "blank_boards_checked", "blank_boards", "seed",
                              "Experiment", "boards_views") if re.match(EXPS_KEEP, name)]
    assert kept == ["boards", "boards_checked", "blank_boards_checked", "Experiment"]


def test_exps_passes_further_arguments_to_dvc():
    command = exps_command(["-A", "--sort-by", "boards_checked"])
    assert command[1:5] == ["-m", "dvc", "exp", "show"] and command[-3:] == ["-A", "--sort-by", "boards_checked"]


def wide_repo(root: Path) -> Path:
    """A git + DVC repository whose workspace changes nine long params: a table near 300 wide."""
    keys = {f"a_long_parameter_name_{i}": f"a_long_value_number_{i}" for i in range(9)}
    run = lambda *args: subprocess.run(args, cwd=root, check=True, capture_output=True)  # noqa: E731
    run("git", "init", "-q")
    run(sys.executable, "-m", "dvc", "init", "-q")
    (root / "params.yaml").write_text(yaml.safe_dump({"train": keys}))
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"fit": {
        "cmd": "python -c pass", "deps": ["params.yaml"], "params": [f"train.{k}" for k in keys]}}}))
    run("git", "add", "-A")
    run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "wide")
    (root / "params.yaml").write_text(yaml.safe_dump({"train": {k: v + "_changed" for k, v in keys.items()}}))
    return root


EXPS = [sys.executable, "-c", "import sys; from satground.harness.cli import exps; sys.exit(exps())"]


def widest(text: str) -> int:
    return max(len(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line)) for line in text.splitlines())


def test_exps_fits_120_columns_paged_or_not(tmp_path):
    """DVC widens the table to its full width whenever it pages (dvc/ui/table.py), even into a
    pipe; satground-exps keeps 120 columns into a pipe, with --no-pager, and paged at a terminal."""
    root = wide_repo(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "DVC_PAGER", "PAGER", "LESS")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    plain = subprocess.run([sys.executable, "-m", "dvc", "exp", "show", "--only-changed", "--drop", EXPS_DROP],
                           cwd=root, env=dict(env, COLUMNS="120"), capture_output=True, text=True, check=True)
    assert widest(plain.stdout) > 200 and "a_long_value_number_8_changed" in plain.stdout
    for extra in ([], ["--no-pager"]):
        shown = subprocess.run(EXPS + extra, cwd=root, env=env, capture_output=True, text=True, check=True)
        assert "Experiment" in shown.stdout and widest(shown.stdout) <= 120, shown.stdout
    # at a terminal (a pseudo-terminal): paged through PAGER, still 120 wide
    primary, secondary = pty.openpty()
    process = subprocess.Popen(EXPS, cwd=root, env=dict(env, PAGER="cat"), stdin=secondary,
                               stdout=secondary, stderr=secondary)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed: every process on it ended
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert process.wait() == 0
    paged = b"".join(chunks).decode()
    assert "Experiment" in paged and "train.a_long" in paged and widest(paged) <= 120, paged


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
