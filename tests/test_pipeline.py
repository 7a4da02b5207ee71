"""End to end: `dvc repro` of the smoke profile in a fresh copy of the repository, then what a
parameter change makes stale, and one-line errors for invalid parameters."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from stage_commands import declared, script, smoke_checkout

REPO = Path(__file__).resolve().parent.parent
STAGES = {"prepare", "cluster", "distill", "ground", "train", "reread", "proofread",
          "baseline_grounded", "baseline_ungrounded", "baseline_nonvisual", "error_injection", "evaluate"}


def sh(args, cwd, check=True):
    env = dict(os.environ, PYTHONPATH=str(cwd),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def smoke_repo(tmp_path_factory):
    """A copy of the tracked files, as a fresh clone would have them, on the smoke profile."""
    root = smoke_checkout(tmp_path_factory.mktemp("clone"), sh)
    sh(["git", "add", "-A"], root)
    sh(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "smoke"], root)
    sh(["dvc", "repro"], root)
    return root


def stale_stages(root) -> set:
    status = json.loads(sh(["dvc", "status", "--json"], root).stdout or "{}")
    return {name.split(":")[-1] for name in status}


@pytest.mark.slow
def test_smoke_profile_runs_end_to_end(smoke_repo):
    assert stale_stages(smoke_repo) == set()
    lock = yaml.safe_load((smoke_repo / "dvc.lock").read_text())
    assert set(lock["stages"]) == STAGES
    results = (smoke_repo / "metrics" / "results.md").read_text()
    assert "Ours" in results and "Original SATNet" in results
    # one metrics file per stage, the headline names unique across stages
    names = []
    for stage in STAGES:
        names += json.loads((smoke_repo / "metrics" / stage / "metrics.json").read_text())
    assert len(names) == len(set(names)) and {"boards", "blank_boards", "cluster_dev_accuracy", "perm_right",
                                              "ground_val_blank_cells", "nonvisual_boards"} <= set(names)
    (shown,) = json.loads(sh(["dvc", "metrics", "show", "--json"], smoke_repo).stdout).values()
    assert set(shown["data"]) == {f"metrics/{s}/metrics.json" for s in STAGES}
    for plot in ("boards.png", "permutation.png", "cluster_samples.png", "cluster_confusion.png"):
        assert (smoke_repo / "plots" / plot).stat().st_size > 1000


@pytest.mark.slow
def test_a_change_makes_only_the_stages_that_use_it_stale(smoke_repo):
    """DVC marks the stage whose param or code changed; the stages after it rerun only if its
    outputs change. Nothing upstream or beside it may be stale."""
    params_file = smoke_repo / "params.yaml"
    original = params_file.read_text()
    try:
        for section, key, value, expected in [("proofread", "epochs", 5, {"proofread"}),
                                              ("ground", "temperature", 0.2, {"ground"}),
                                              ("distill", "lr", 5e-4, {"distill"})]:
            params = yaml.safe_load(original)
            params[section][key] = value
            params_file.write_text(yaml.safe_dump(params))
            assert stale_stages(smoke_repo) == expected, (section, key)
        params_file.write_text(original)
        # code deps are per module (per package for the clustering family): the clusterers and
        # the ablation's corruption rerun cluster and distill, the Symbol Grounding Loss ground
        # alone (the baselines' BCE lives in training.py), not the stages after them
        for module, expected in [("clustering/ablation.py", {"cluster", "distill"}),
                                 ("solver/losses.py", {"ground"})]:
            path = smoke_repo / "satground" / module
            path.write_text(path.read_text() + "\n# touched\n")
            assert stale_stages(smoke_repo) == expected, module
            sh(["git", "checkout", f"satground/{module}"], smoke_repo)
    finally:
        sh(["git", "checkout", "params.yaml", "satground/solver/losses.py", "satground/clustering/ablation.py"], smoke_repo)
    assert stale_stages(smoke_repo) == set()


@pytest.mark.slow
def test_a_second_dvc_repro_on_a_running_workspace_is_refused_and_the_first_ends_whole(smoke_repo):
    """Two `dvc repro` on one workspace: DVC's own lock (.dvc/tmp/rwlock) refuses the second,
    naming the first's pid, while the first is running a stage; the first finishes, and dvc.lock
    and the outputs are those of one run."""
    import time

    lock_before = (smoke_repo / "dvc.lock").read_text()
    env = dict(os.environ, PYTHONPATH=str(smoke_repo),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    first = subprocess.Popen(["dvc", "repro", "-f", "-s", "train"], cwd=smoke_repo, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rwlock, deadline = smoke_repo / ".dvc" / "tmp" / "rwlock", time.time() + 300
    while time.time() < deadline and "models/solver.pt" not in (rwlock.read_text() if rwlock.exists() else ""):
        time.sleep(0.1)  # until the first is training (it holds train's outputs)
    second = sh(["dvc", "repro"], smoke_repo, check=False)
    out = first.communicate()[0]
    assert first.returncode == 0, out[-2000:]
    assert second.returncode != 0 and "is busy, it is being blocked by" in second.stderr, second.stderr
    assert f"PID {first.pid}" in second.stderr
    assert (smoke_repo / "dvc.lock").read_text() == lock_before  # the same seeds, the same bytes
    assert stale_stages(smoke_repo) == set()


@pytest.mark.slow
def test_a_changed_cache_object_is_caught_by_dvc_and_repro_restores_it(smoke_repo, tmp_path):
    """A DVC cache object whose bytes changed (a bad disk, a hand edit, a tampered remote).
    Locally, DVC trusts its cache at `dvc checkout` but hashes it again at `dvc status` and
    `dvc repro`: the stage shows as changed, and `dvc repro` reruns it, restoring the same bytes.
    Pulled from a remote, the object is refused at checkout, naming the output, and not written."""
    import hashlib

    lock = yaml.safe_load((smoke_repo / "dvc.lock").read_text())
    (out,) = [o for o in lock["stages"]["prepare"]["outs"] if o["path"] == "plots/boards.png"]
    path, md5 = smoke_repo / out["path"], out["md5"]

    def tamper(store: Path):
        obj = store / "files" / "md5" / md5[:2] / md5[2:]
        obj.chmod(0o644)
        obj.write_bytes(obj.read_bytes()[:-1] + b"x")

    # a remote holding the object, then tampered with
    remote = tmp_path / "remote"
    sh(["dvc", "remote", "add", "--local", "shared", str(remote)], smoke_repo)
    sh(["dvc", "push", "-r", "shared", out["path"]], smoke_repo)
    tamper(remote)
    clone = tmp_path / "clone"
    sh(["git", "clone", "-q", str(smoke_repo), str(clone)], tmp_path)
    sh(["dvc", "remote", "add", "--local", "shared", str(remote)], clone)
    pulled = sh(["dvc", "pull", "-r", "shared", out["path"]], clone, check=False)
    assert pulled.returncode != 0 and out["path"] in pulled.stderr, pulled.stderr
    assert not (clone / out["path"]).exists()

    # the local cache object tampered with
    tamper(smoke_repo / ".dvc" / "cache")
    path.unlink()
    sh(["dvc", "checkout", out["path"]], smoke_repo, check=False)  # DVC's checkout trusts its cache
    assert stale_stages(smoke_repo) == {"prepare"}
    sh(["dvc", "repro"], smoke_repo)
    assert stale_stages(smoke_repo) == set()
    assert hashlib.md5(path.read_bytes()).hexdigest() == md5
    assert yaml.safe_load((smoke_repo / "dvc.lock").read_text()) == lock


@pytest.mark.slow
@pytest.mark.parametrize("section,key,value,stage", [
    ("train", "epochs", -1, "train"),
    ("satnet", "m", 0, "ground"),
    ("satnet", "aux", -5, "baseline_nonvisual"),
    ("cluster", "epochs", "ten", "cluster"),
    ("data", "n_train", -3, "prepare"),
])
def test_invalid_params_stop_with_one_line_naming_the_parameter(smoke_repo, tmp_path, section, key,
                                                                value, stage):
    params = yaml.safe_load((smoke_repo / "params.yaml").read_text())
    params[section][key] = value
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(params))
    result = sh(["python", script(stage), *declared(stage, params=bad)], smoke_repo, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{section}.{key}" in lines[0], result.stderr


def test_missing_data_path_is_one_line_error(tmp_path):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["data"]["mnist"] = {"source": "idx", "root": str(tmp_path / "nowhere"), "download": False}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    result = sh(["python", "stages/prepare.py", *declared("prepare", params=tmp_path / "params.yaml",
                 data_out=tmp_path / "out", metrics_out=tmp_path / "m", plot_out=tmp_path / "p.png")],
                REPO, check=False)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nowhere" in lines[0], result.stderr
    assert not (tmp_path / "out").exists()


def test_profile_switch_rejects_unknown_names(tmp_path):
    result = sh(["python", "scripts/profile.py", "laptop"], REPO, check=False)
    assert result.returncode == 1 and "unknown profile 'laptop'" in result.stderr


def stage_error(smoke_repo, stage, **paths) -> str:
    """Run a stage by hand, its declared command with `paths` replaced; it must fail with exit 1
    and one line on stderr, which is returned."""
    result = sh(["python", script(stage), *declared(stage, **paths)], smoke_repo, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.slow
def test_evaluate_checks_every_input_before_writing_anything(smoke_repo, tmp_path):
    outputs = [smoke_repo / "metrics" / name for name in ("evaluate/metrics.json", "evaluate/scores.json",
                                                          "results.md", "results.csv")]
    before = [path.read_bytes() for path in outputs]
    (tmp_path / "scores.json").write_text('{"no_proofreader": {"board_accuracy": 0.5}}\n')  # scores missing
    line = stage_error(smoke_repo, "evaluate", baseline_nonvisual=tmp_path)
    assert str(tmp_path / "scores.json") in line and "rerun its stage" in line
    not_a_permutation = tmp_path / "permutation.json"
    saved = json.loads((smoke_repo / "models" / "permutation.json").read_text())
    not_a_permutation.write_text(json.dumps({**saved, "permutation": [0, 0, 1, 2]}))
    line = stage_error(smoke_repo, "evaluate", permutation=not_a_permutation)
    assert str(not_a_permutation) in line and "'permutation' must be a permutation" in line
    assert [path.read_bytes() for path in outputs] == before  # nothing rewritten


@pytest.mark.slow
def test_stages_refuse_a_model_of_the_wrong_kind(smoke_repo):
    line = stage_error(smoke_repo, "error_injection", model="models/solver.pt")
    assert "models/solver.pt" in line and "a visual solver, but this stage needs a symbolic one" in line
    line = stage_error(smoke_repo, "proofread", model="models/baseline_nonvisual.pt",
                       model_out="/tmp/never_written.pt")
    assert "a symbolic solver, but this stage needs a visual one" in line
    assert not Path("/tmp/never_written.pt").exists()


@pytest.mark.slow
def test_satground_exps_shows_the_headline_metrics_and_no_dep_hash(smoke_repo):
    """satground-exps' filter through the real `dvc exp show` (its --drop matches from the start)."""
    from satground.harness.cli import exps_command
    header = sh(exps_command(["--csv"]), smoke_repo).stdout.splitlines()[0].split(",")
    assert {"rev", "boards", "boards_checked", "blank_boards_checked"} <= set(header), header
    assert not any("/" in column or column.endswith((".py", ".yaml", ".html")) for column in header), header
    assert "cells" not in header and "cluster_dev_accuracy" not in header, header
