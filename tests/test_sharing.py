"""Sharing runs between machines (docs/sharing.md), with local stand-ins: a bare git repository as
the shared origin, a folder as the DVC remote, two clones A and B on the smoke profile.
A reproduces and pushes the DVC cache with its run cache, runs an experiment and pushes it;
B restores every stage from the run cache without running one, then pulls, shows and applies the
experiment without rerunning it."""
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from script_import import script
from stage_commands import smoke_checkout

metrics_objects = script("scripts", "adopt_run").metrics_objects

STAGES = {"prepare", "cluster", "distill", "ground", "train", "reread", "proofread",
          "baseline_grounded", "baseline_ungrounded", "baseline_nonvisual", "error_injection", "evaluate"}
EXP = "proofread-2"


def sh(args, cwd, check=True):
    env = dict(os.environ, PYTHONPATH=str(cwd),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def make_origin(tmp_path) -> Path:
    """A bare repository holding one commit: the tracked files as a fresh clone has them, on the
    smoke profile, with the DVC remote configured; no dvc.lock and no outputs yet."""
    work = smoke_checkout(tmp_path / "work", sh)
    sh(["dvc", "remote", "add", "-d", "store", str(tmp_path / "dvcremote")], work)
    sh(["git", "add", "-A"], work)
    sh(["git", "commit", "-qm", "smoke profile, shared DVC remote"], work)
    sh(["git", "clone", "-q", "--bare", str(work), str(tmp_path / "origin.git")], tmp_path)
    return tmp_path / "origin.git"


def timed(args, cwd):
    start = time.perf_counter()
    result = sh(args, cwd)
    return result, time.perf_counter() - start


def lock_md5(lock_text, stage, path):
    (out,) = [o for o in yaml.safe_load(lock_text)["stages"][stage]["outs"] if o["path"] == path]
    return out["md5"]


@pytest.mark.slow
def test_a_colleague_restores_runs_and_experiments_without_rerunning(tmp_path):
    origin = make_origin(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    for clone in (a, b):
        sh(["git", "clone", "-q", str(origin), str(clone)], tmp_path)

    # machine A: run the pipeline, share the cache with its run cache, then an experiment
    ran, a_seconds = timed(["dvc", "repro"], a)
    assert {line.split("'")[1] for line in ran.stdout.splitlines()
            if line.startswith("Running stage")} == STAGES
    runs = a / ".dvc" / "cache" / "runs"
    assert runs.is_dir() and len(list(runs.glob("*/*/*"))) == len(STAGES), \
        "every stage saves a run-cache entry"
    sh(["dvc", "push", "--run-cache"], a)
    shared = {path: (a / "metrics" / path).read_bytes() for path in (
        "results.md", "proofread/metrics.json", "proofread/info.json", "train/plots/metrics/loss.tsv")}
    sh(["dvc", "exp", "run", "-n", EXP, "-S", "proofread.epochs=2"], a)
    sh(["dvc", "exp", "push", "origin", EXP], a)
    a_metrics = json.loads((a / "metrics" / "proofread" / "metrics.json").read_text())

    # machine B, same commit, no dvc.lock of A's run: every stage comes from the run cache, none
    # runs. `--pull` fetches the run cache and the outputs its entries name (`dvc pull --run-cache`
    # fetches the entries only, and fails checking out outputs dvc.lock does not have)
    restored, b_seconds = timed(["dvc", "repro", "--pull"], b)
    print(f"\nsmoke profile: clone A `dvc repro` {a_seconds:.1f} s,"
          f" clone B `dvc repro --pull` {b_seconds:.1f} s")
    log = restored.stdout
    assert "Running stage" not in log, log
    assert {line.split("'")[1] for line in log.splitlines()
            if "is cached - skipping run" in line} == STAGES, log
    assert not list((b / "metrics").glob("*/timing.json")), "a stage ran on B"
    assert not json.loads(sh(["dvc", "status", "--json"], b).stdout or "{}")
    for path, content in shared.items():
        assert (b / "metrics" / path).read_bytes() == content, path

    # B gets A's experiment: listed with its metrics, compared, applied with its models
    sh(["dvc", "exp", "pull", "origin", EXP], b)
    shown = json.loads(sh(["dvc", "exp", "show", "--json"], b).stdout)
    exps = {exp["name"]: exp for rev in shown for e in (rev.get("experiments") or [])
            for exp in e["revs"]}
    assert EXP in exps, shown
    exp_metrics = exps[EXP]["data"]["metrics"]["metrics/proofread/metrics.json"]["data"]
    assert exp_metrics == a_metrics
    assert exps[EXP]["data"]["params"]["params.yaml"]["data"]["proofread"]["epochs"] == 2
    diff = json.loads(sh(["dvc", "metrics", "diff", EXP, "--json"], b).stdout)
    assert "metrics/proofread/metrics.json" in diff, diff
    plots = json.loads(sh(["dvc", "plots", "diff", EXP, "--json"], b).stdout)
    assert EXP in json.dumps(plots["data"]["loss"]), list(plots["data"])
    assert not [e for e in plots.get("errors", []) if "metrics/proofread" in e.get("source", "")]
    exp_lock = sh(["git", "show", f"{exps[EXP]['rev']}:dvc.lock"], b).stdout
    sh(["dvc", "exp", "apply", EXP], b)
    sh(["dvc", "checkout"], b)
    model = b / "models" / "solver_proofread.pt"
    assert hashlib.md5(model.read_bytes()).hexdigest() == \
        lock_md5(exp_lock, "proofread", "models/solver_proofread.pt")
    assert (b / "metrics" / "proofread" / "metrics.json").read_text() == \
        (a / "metrics" / "proofread" / "metrics.json").read_text()
    assert not json.loads(sh(["dvc", "status", "--json"], b).stdout or "{}")
    assert not list((b / "metrics").glob("*/timing.json")), "a stage ran on B"


def test_git_holds_the_committed_runs_metrics_objects():
    """A fresh clone's `dvc metrics show` and `dvc metrics diff` read the committed run's
    metrics/<stage>/metrics.json from the DVC cache through dvc.lock: git carries exactly those
    cache objects (.dvc/cache/files/md5/, force-added; docs/pipeline.md), so a new dvc.lock needs
    its objects added too. Read as committed (HEAD): a run in this checkout rewrites dvc.lock."""
    repo = Path(__file__).resolve().parent.parent

    def git(*args) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)

    tracked = set(git("ls-files", ".dvc/cache").stdout.decode().split())
    committed_lock = git("show", "HEAD:dvc.lock").stdout.decode()
    stages = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]
    wanted = {path: "".join(path.split("/")[-2:]) for path in metrics_objects(committed_lock, stages)}
    missing = sorted(set(wanted) - tracked)
    assert not missing, (f"after committing a new dvc.lock: git add -f {' '.join(missing)} "
                         "(scripts/adopt_run.py CLONE stages the lock with its objects)")
    for path, md5 in wanted.items():
        assert hashlib.md5(git("show", f"HEAD:{path}").stdout).hexdigest() == md5, path
    assert all(path.startswith(".dvc/cache/files/md5/") for path in tracked), tracked


def test_adopting_a_run_whose_objects_are_missing_stops_before_copying(tmp_path):
    """scripts/adopt_run.py copies a clone's dvc.lock only with every metrics object it names."""
    repo = Path(__file__).resolve().parent.parent
    lock = (repo / "dvc.lock").read_bytes()
    (tmp_path / "dvc.lock").write_bytes(lock)
    result = subprocess.run([sys.executable, str(repo / "scripts" / "adopt_run.py"), str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "lacks the cache object .dvc/cache/files/md5/" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (repo / "dvc.lock").read_bytes() == lock
