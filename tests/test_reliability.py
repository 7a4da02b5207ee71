"""Bad input, hostile files and interrupted runs: every case stops with one line naming the file or
parameter, and leaves no half-written or stale output. (Bad params and CSV/idx/published files of
`prepare`: tests/test_data.py, tests/test_mnist.py, tests/test_sudoku_files.py; the layer's
numerics: tests/test_numerics.py; whole stages on the smoke profile: tests/test_pipeline.py.)"""
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from satground.boards import sudoku, files as sudoku_files
from satground.clustering import load_clusterer
from satground.harness.params import known_keys, load_params, parse_params
from satground.harness.stage import stage_device
from satground.boards.data import (build_visual_boards, load_boards, load_truth, save_prepared, split_files,
                                   split_image_pools)
from satground.solver.grounding import load_permutation, permutation_record
from satground.harness.io import PipelineError, atomic_directory, atomic_write, load_torch, save_all, save_torch
from satground.readers.classifier import load_classifier, save_classifier
from satground.readers.lenet import LeNet
from satground.solver.models import SymbolicSolver, checkpoint, load_solver
from stage_commands import REPO, declared, script


def one_line(exc_info, *parts) -> str:
    message = str(exc_info.value)
    assert "\n" not in message, message
    for part in parts:
        assert str(part) in message, message
    return message


def write_prepared(root: Path, board_size: int, n: int = 12, seed: int = 0) -> Path:
    """A small prepared folder of `board_size` boards with synthetic digit images."""
    K = board_size ** 2
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(1, K + 1), 6).astype(np.uint8)
    images = rng.integers(0, 256, (len(labels), 28, 28), dtype=np.uint8)
    pools = split_image_pools(images, labels, board_size, 0.34, seed)
    puzzles, solutions = sudoku.generate_puzzles(2 * n, board_size, seed)
    files = {}
    for i, split in enumerate(("train", "test")):
        rows = slice(i * n, (i + 1) * n)
        boards = build_visual_boards(puzzles[rows], solutions[rows], *pools[split], board_size, seed)
        files.update(split_files(split, boards, pools[split][1]))
    save_prepared(root, files)
    return root


@pytest.fixture
def prepared(tmp_path) -> Path:
    return write_prepared(tmp_path / "prepared", 2)


# ---------------------------------------------------------------------------------------------
# 1. no code runs from a data file


class Payload:
    """Pickles to a call of os.system: loading it with pickle would create the marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


LOADERS = {  # artifact kind -> (file name, loader)
    "boards": ("train.pt", lambda p: load_boards(p.parent, "train")),
    "grounded labels": ("train_grounded.pt", lambda p: load_boards(p.parent, "train", view="grounded")),
    "evaluation truth": ("train_truth.pt", lambda p: load_truth(p.parent, "train")),
    "clusterer": ("final.pt", load_clusterer),
    "classifier": ("classifier.pt", load_classifier),
    "solver": ("solver.pt", load_solver),
}


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_a_pickle_payload_is_refused_and_never_runs(prepared, tmp_path, kind):
    name, loader = LOADERS[kind]
    marker = tmp_path / "payload_ran"
    path = prepared / name
    good = torch.load(path, weights_only=True) if path.exists() else {}
    torch.save({**good, "extra": Payload(marker)} if isinstance(good, dict) else Payload(marker), path)
    with pytest.raises(PipelineError) as exc:
        loader(path)
    one_line(exc, path, "refused", "could run code")
    assert not marker.exists()


def deflated(path: Path) -> None:
    """Rewrite a torch.save file with its entries compressed: a 50 MB tensor in ~50 KB."""
    entries = {}
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


@pytest.mark.parametrize("kind", sorted(LOADERS))
@pytest.mark.parametrize("attack", ["overlapping shape", "zip bomb"])
def test_a_file_whose_tensors_claim_absurd_sizes_is_refused_before_allocation(prepared, tmp_path,
                                                                             kind, attack):
    """A pulled file of a few KB that would expand to terabytes: a stride-0 view claiming 10^12
    floats, or compressed entries (torch.save stores them plain) claiming far more than the file."""
    name, loader = LOADERS[kind]
    path = prepared / name
    good = torch.load(path, weights_only=True) if path.exists() else {}
    huge = torch.zeros(1).expand(10 ** 12) if attack == "overlapping shape" else torch.zeros(50_000_000, dtype=torch.uint8)
    torch.save({**good, "extra": huge} if isinstance(good, dict) else huge, path)
    if attack == "zip bomb":
        deflated(path)
        assert path.stat().st_size < 1_000_000
    with pytest.raises(PipelineError) as exc:
        loader(path)
    one_line(exc, path, "refused", "claims")


def test_a_published_tensor_file_claiming_an_absurd_shape_is_refused(tmp_path):
    path = tmp_path / "features.pt"
    torch.save(torch.zeros(1).expand(10 ** 12), path)
    with pytest.raises(PipelineError) as exc:
        sudoku_files._load_tensor(path, mmap=True)
    one_line(exc, path, "refused", "claims shape")


# ---------------------------------------------------------------------------------------------
# 3. boards validated on load


def test_a_solution_that_is_not_a_sudoku_is_refused(prepared):
    """A blank cell relabelled with the digit of a given cell in its row: the blank cells alone
    still obey the rule (the ungrounded file passes), the full solution does not."""
    path = prepared / "test_grounded.pt"
    grounded = torch.load(path, weights_only=True)
    stored = torch.load(prepared / "test.pt", weights_only=True)
    labels, given = grounded["labels"].clone(), stored["is_input"][3]
    K = 4
    for cell in (~given).nonzero()[:, 0].tolist():
        row = [c for c in range(cell - cell % K, cell - cell % K + K) if given[c]]
        for other in row:
            trial = stored["labels"][3].clone()
            trial[cell] = labels[3, other]
            if not sudoku.conflicting_boards(trial.numpy()[None], 2)[0]:
                break
        else:
            continue
        break
    labels[3, cell] = labels[3, other]
    stored["labels"][3, cell] = labels[3, cell]  # the ungrounded file agrees and is clean
    torch.save(stored, prepared / "test.pt")
    torch.save({"labels": labels}, path)
    load_boards(prepared, "test")
    with pytest.raises(PipelineError) as exc:
        load_boards(prepared, "test", view="grounded")
    one_line(exc, path, "board 3", "not a valid Sudoku grid")


def test_truth_files_must_match_their_boards(prepared, tmp_path):
    other = write_prepared(tmp_path / "other", 2, n=12, seed=1)
    shutil.copy(other / "test_truth.pt", prepared / "test_truth.pt")
    with pytest.raises(PipelineError) as exc:
        load_truth(prepared, "test")
    one_line(exc, prepared / "test_truth.pt", "input_labels")

    truth = torch.load(other / "test_truth.pt", weights_only=True)
    truth["image_labels"] = truth["image_labels"][:-1]  # one image label short of the pool
    torch.save(truth, prepared / "test_truth.pt")
    with pytest.raises(PipelineError) as exc:
        load_truth(prepared, "test")
    one_line(exc, prepared / "test_truth.pt", "image_labels", "shape")


def test_train_and_test_boards_must_have_one_size(prepared, tmp_path):
    nine = write_prepared(tmp_path / "nine", 3, n=3)
    shutil.copy(nine / "test.pt", prepared / "test.pt")
    train = load_boards(prepared, "train")
    with pytest.raises(PipelineError) as exc:
        load_boards(prepared, "test", like=train)
    one_line(exc, prepared / "test.pt", "9x9 boards", "4x4")


def test_a_solver_is_checked_against_its_boards_and_kind(prepared, tmp_path):
    boards = load_boards(prepared, "test")
    path = tmp_path / "nine.pt"
    save_torch(checkpoint(SymbolicSolver(3, 8, 2)), path)
    with pytest.raises(PipelineError) as exc:
        load_solver(path, boards=boards)
    one_line(exc, path, "9x9", "4x4")
    with pytest.raises(PipelineError) as exc:
        load_solver(path, kind="visual")
    one_line(exc, path, "symbolic solver", "visual")


# ---------------------------------------------------------------------------------------------
# 4, 5. params: unknown keys, devices, seeds


def test_a_misspelt_key_names_the_nearest_known_one(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("cluster:\n  metod: umap\n")
    with pytest.raises(PipelineError) as exc:
        load_params(path)
    one_line(exc, path, "unknown parameter 'cluster.metod'", "did you mean 'cluster.method'")


@pytest.mark.parametrize("device,problem", [("tpu", "must be auto, cpu, cuda or cuda:N"),
                                            ("cuda:x", "must be auto, cpu, cuda or cuda:N")]
                         + ([] if torch.cuda.is_available() else [("cuda", "has no CUDA GPU")]))
def test_a_device_the_machine_lacks_stops_before_any_work(device, problem, monkeypatch):
    monkeypatch.setenv("SATGROUND_DEVICE", device)
    with pytest.raises(PipelineError) as exc:
        stage_device()
    one_line(exc, "$SATGROUND_DEVICE", problem)


def test_the_device_is_not_a_parameter(monkeypatch):
    # chosen by the machine, so a new GPU makes no stage stale; a params file naming one is refused
    monkeypatch.delenv("SATGROUND_DEVICE", raising=False)
    assert stage_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("SATGROUND_DEVICE", "cpu")
    assert stage_device().type == "cpu"
    assert not any("device" in key for key in known_keys())


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text("data:\n  n_train: 200\n  n_test: 50\n  n_train: 7\n")
    with pytest.raises(PipelineError) as exc:
        load_params(path)
    one_line(exc, path, "key 'n_train' given twice, on lines 2 and 4")


@pytest.mark.parametrize("key,value,problem", [
    ("distill.lr", float("nan"), "'distill.lr' must be a finite number"),
    ("distill.lr", float("inf"), "'distill.lr' must be a finite number"),
    ("distill.lr", 1e30, "'distill.lr' must be <= 1.0"),
    ("satnet.lr", -1.0, "'satnet.lr' must be >= 0.0"),
    ("distill.mislabel", float("nan"), "'distill.mislabel' must be a finite number"),
    ("distill.augment.shift", float("nan"), "'distill.augment.shift' must be a finite number"),
    ("satnet.m", 10**12, "'satnet.m' and 'satnet.aux' need about"),
])
def test_non_finite_and_absurd_parameters_stop_the_stage_before_any_work(key, value, problem,
                                                                          tmp_path):
    """Through the stage's own command line: exit 1, one line naming the params file and key,
    and no output written (the stage stops while reading its parameters)."""
    stage = {"distill": "distill", "train": "train", "satnet": "ground"}[key.split(".")[0]]
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    node = params
    *parents, leaf = key.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(params))
    line = one_line_exit_1(stage_command(stage, tmp_path, params=tmp_path / "bad.yaml"))
    assert str(tmp_path / "bad.yaml") in line and problem in line, line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))


@pytest.mark.parametrize("env,problem", [
    ({"SATGROUND_CPU_TARGET": "no-such-cpu"}, "failed"),
    ({"CC": "false"}, "compiling"),
    ({"CC": "/no/such/cc"}, "no C compiler '/no/such/cc'"),
])
def test_a_machine_the_kernel_cannot_run_on_stops_the_stage_in_one_line(env, problem, tmp_path):
    line = one_line_exit_1(stage_command("ground", tmp_path), SATGROUND_DEVICE="cpu", **env)
    assert problem in line, line
    assert not (tmp_path / "out").exists()


def test_bf16_products_where_the_kernel_has_none_stop_the_stage_naming_the_parameter(tmp_path):
    """satnet.precision bf16 on a build with neither AMX nor AVX512_BF16 (the AVX2 build): one
    line naming the parameter, before any work; SATGROUND_CPU_PRECISION does not override it."""
    from satground.satnet import cpu
    if not all(f in cpu.host_features() for f in cpu.X86_LEVELS.get("x86-64-v3", ["none"])):
        pytest.skip("needs an x86-64-v3 CPU")
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["satnet"]["precision"] = "bf16"
    (tmp_path / "bf16.yaml").write_text(yaml.safe_dump(params))
    line = one_line_exit_1(stage_command("ground", tmp_path, params=tmp_path / "bf16.yaml"),
                           SATGROUND_DEVICE="cpu", SATGROUND_CPU_TARGET="x86-64-v3",
                           SATGROUND_CPU_PRECISION="fp32")
    assert "satnet.precision bf16: the kernel built for SATGROUND_CPU_TARGET=x86-64-v3" in line, line
    assert not (tmp_path / "out").exists()


def stage_command(stage, tmp_path, **paths):
    """The stage's command as dvc.yaml declares it, its model, metrics and plot outputs moved
    under tmp_path/out (the model as <stage>.pt); `paths` replace others (params=...)."""
    out = tmp_path / "out"
    argv = declared(stage)
    moved = {"model_out": out / f"{stage}.pt", "metrics_out": out / "m", "plot_out": out / "plot.png"}
    moved = {name: path for name, path in moved.items() if "--" + name.replace("_", "-") in argv}
    return [sys.executable, str(REPO / script(stage)), *declared(stage, **{**moved, **paths})]


def one_line_exit_1(command, **env) -> str:
    """Run a stage command from the repository; it must exit 1 with one line on stderr."""
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, **env})
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_stage_refuses_to_start_while_another_process_writes_its_outputs(tmp_path):
    """The orphan of a killed `dvc repro` (or a second repro) holds the outputs' lock: a
    second run stops in one line naming the holder, and writes nothing."""
    import fcntl

    from satground.harness.stage import output_lock_path
    lock = output_lock_path(tmp_path / "out" / "ground.pt")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.truncate(0)  # a lock file an earlier run left (same path, recycled tmp folder)
        held.write("4242")
        held.flush()
        line = one_line_exit_1(stage_command("ground", tmp_path))
    assert "another process (pid 4242) is writing" in line, line
    assert not (tmp_path / "out").exists()


def test_an_output_that_is_an_existing_folder_stops_the_stage_before_any_work(tmp_path):
    (tmp_path / "out" / "ground.pt").mkdir(parents=True)
    line = one_line_exit_1(stage_command("ground", tmp_path))
    assert "ground.pt: output is an existing folder" in line, line
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["ground.pt"]


def test_an_output_under_a_read_only_folder_is_refused(tmp_path, monkeypatch):
    # the mode bits do not bind root (these machines), a read-only mount does: os.access says
    from satground.harness import stage as config
    (tmp_path / "ro").mkdir()
    real = os.access
    monkeypatch.setattr(config.os, "access",
                        lambda p, mode: False if Path(p) == tmp_path / "ro" else real(p, mode))
    with pytest.raises(PipelineError) as exc:
        config.check_output_place(tmp_path / "ro" / "models" / "classifier.pt")
    one_line(exc, tmp_path / "ro", "cannot write here")
    config.check_output_place(tmp_path / "rw" / "classifier.pt")  # a folder yet to be made is fine


def test_an_output_on_a_special_filesystem_is_refused_before_any_work(tmp_path):
    """/proc says it is a writable folder (to root) and then refuses every new file: the check
    makes one, so the stage stops in one line instead of a traceback at its first write."""
    (tmp_path / "p.yaml").write_text("data: {n_train: 60, n_dev: 10, n_test: 20}\n")
    result = subprocess.run([sys.executable, str(REPO / "stages" / "prepare.py"), "--params", "p.yaml",
                             "--data-out", "/proc/satground/prepared", "--plot-out", "b.png",
                             "--metrics-out", "m"], cwd=tmp_path, capture_output=True, text=True)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: /proc/satground/prepared: cannot write here"), lines


def test_a_full_disk_stops_the_stage_in_one_line_and_leaves_no_file(tmp_path):
    """A file-size limit (where a test cannot mount a small filesystem) refuses the writes as a
    full disk does: the stage exits 1 with one line naming what it was writing, and no
    artifact, whole or half-written, and no temporary file is left."""
    import resource
    import signal

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    (tmp_path / "p.yaml").write_text("data: {n_train: 60, n_dev: 10, n_test: 20}\n")
    result = subprocess.run([sys.executable, str(REPO / "stages" / "prepare.py"), "--params", "p.yaml",
                             "--data-out", "out/prepared", "--plot-out", "out/b.png", "--metrics-out", "out/m"],
                            cwd=tmp_path, capture_output=True, text=True, preexec_fn=small_disk)
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("puzzles")]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: 9 files in out/prepared: File too large"), lines
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seeds_outside_32_bits_are_refused(seed):
    with pytest.raises(PipelineError) as exc:
        parse_params({"seed": seed}, "other.yaml")
    one_line(exc, "other.yaml", "'seed'")


# ---------------------------------------------------------------------------------------------
# 6, 7. outputs land as a set; permutation files


def test_a_folder_output_is_replaced_whole_and_kept_on_failure(tmp_path):
    folder = tmp_path / "cluster"
    folder.mkdir()
    (folder / "final.pt").write_text("old run")
    (folder / "epoch_030.pt").write_text("old run")
    with pytest.raises(RuntimeError):
        with atomic_directory(folder) as tmp:
            (tmp / "final.pt").write_text("new run")
            raise RuntimeError("interrupted")
    assert sorted(p.name for p in folder.iterdir()) == ["epoch_030.pt", "final.pt"]
    assert (folder / "final.pt").read_text() == "old run"
    with atomic_directory(folder) as tmp:
        (tmp / "final.pt").write_text("new run")
    assert [p.name for p in folder.iterdir()] == ["final.pt"]  # no file of the old run survives
    assert (folder / "final.pt").read_text() == "new run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster"]


def test_models_saved_together_land_together_or_not_at_all(tmp_path):
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    save_torch({"run": 1}, a)
    with pytest.raises(Exception):
        save_all({a: {"run": 2}, b: {"run": 2, "bad": lambda: 0}})  # the second cannot pickle
    assert torch.load(a, weights_only=True) == {"run": 1} and not b.exists()
    metrics = tmp_path / "metrics.json"
    with pytest.raises(TypeError):
        save_all({a: {"run": 3}, metrics: {"score": object()}})  # not JSON
    assert torch.load(a, weights_only=True) == {"run": 1} and not metrics.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt"]
    save_all({a: {"run": 4}, metrics: {"score": 0.5}})
    assert torch.load(a, weights_only=True) == {"run": 4} and '"score": 0.5' in metrics.read_text()


def test_a_temporary_file_of_a_killed_writer_is_removed_by_the_next_write(tmp_path):
    stale = tmp_path / ".classifier.pt.tmp-99999"  # what a SIGKILL during atomic_write leaves
    stale.write_text("half written")
    with atomic_write(tmp_path / "classifier.pt") as tmp:
        tmp.write_text("complete")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classifier.pt"]
    dvcignore = (Path(__file__).resolve().parents[1] / ".dvcignore").read_text()
    assert ".*.tmp-*" in dvcignore.split()  # and DVC never hashes one


def test_folders_a_killed_folder_writer_left_are_removed_by_the_next_write(tmp_path):
    # what SIGKILL during atomic_directory leaves: its temporary folder (with files), or the
    # replaced folder it had not deleted yet
    for stale in (".cluster.tmp-99999", ".cluster.old.tmp-99998"):
        (tmp_path / stale).mkdir()
        (tmp_path / stale / "epoch_001.pt").write_text("old")
    with atomic_directory(tmp_path / "cluster") as tmp:
        (tmp / "final.pt").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster"]
    assert [p.name for p in (tmp_path / "cluster").iterdir()] == ["final.pt"]


@pytest.mark.parametrize("entry,value,problem", [
    ("permutation", [0, 0, 1, 2], "'permutation' must be a permutation of 0..3"),
    ("output_permutation", [0, 1, 2], "'output_permutation' must be a permutation of 0..3"),
    ("soft_permutation", [[float("nan")] * 4] * 4, "finite 4x4 matrix"),
    ("permutation", [1.7, 2, 0.2, 3], "'permutation' must hold integers, got [1.7, 2, 0.2, 3]"),
])
def test_a_permutation_file_that_is_not_one_is_refused(tmp_path, entry, value, problem):
    path = tmp_path / "permutation.json"
    good = torch.arange(4)
    save_all({path: permutation_record(good, good, torch.eye(4))})
    assert torch.equal(load_permutation(path, 4)["permutation"], good)
    text = path.read_text().replace(f'"{entry}": ', f'"{entry}": {value!r}, "was": '.replace("'", '"'), 1)
    path.write_text(text.replace("nan", "NaN"))
    with pytest.raises(PipelineError) as exc:
        load_permutation(path, 4)
    one_line(exc, path, problem)


def test_boards_files_without_a_board_or_breaking_the_rule_are_refused(prepared):
    stored = torch.load(prepared / "train.pt", weights_only=True)
    empty = {**stored, **{key: stored[key][:0] for key in ("cell_image", "is_input", "labels")}}
    torch.save(empty, prepared / "train.pt")
    with pytest.raises(PipelineError) as exc:
        load_boards(prepared, "train")
    one_line(exc, prepared / "train.pt", "holds no board")
    ones = {**stored, "labels": torch.where(stored["is_input"], 0, 1).to(torch.uint8)}
    torch.save(ones, prepared / "train.pt")  # every blank cell labelled 1
    with pytest.raises(PipelineError) as exc:
        load_boards(prepared, "train")
    one_line(exc, prepared / "train.pt", "blank-cell labels repeat a digit in a row, column or box")


@pytest.mark.parametrize("change,problem", [
    (lambda saved: saved.update(n_classes="abc"), "'n_classes' must be 4 for 4x4 boards, got 'abc'"),
    (lambda saved: saved["config"].update(m=-1), "solver config 'm' must be int >= 1, got -1"),
    (lambda saved: saved["config"].update(board_size="2"), "'board_size' must be int 2 or 3"),
    (lambda saved: saved["solver"]["satnet.S"].__setitem__((0, 0), float("nan")),
     "non-finite weights (NaN/inf) in 'satnet.S'"),
    (lambda saved: saved["classifier"]["fc2.bias"].__setitem__(0, float("inf")),
     "classifier holds non-finite weights (NaN/inf) in 'fc2.bias'"),
])
def test_a_foreign_or_broken_solver_checkpoint_is_refused_naming_the_file(change, problem, tmp_path):
    path = tmp_path / "solver.pt"
    from satground.solver.models import VisualSolver
    saved = checkpoint(VisualSolver(LeNet(4), SymbolicSolver(2, m=20, aux=4, max_iter=5)))
    change(saved)
    save_all({path: saved})
    with pytest.raises(PipelineError) as exc:
        load_solver(path)
    one_line(exc, path, problem)


def test_a_lenet_file_with_nan_weights_or_a_foreign_class_count_is_refused(tmp_path):
    model = LeNet(4)
    with torch.no_grad():
        model.fc2.weight[0, 0] = float("nan")
    save_classifier(model, tmp_path / "nan.pt")
    with pytest.raises(PipelineError) as exc:
        load_classifier(tmp_path / "nan.pt")
    one_line(exc, tmp_path / "nan.pt", "non-finite weights (NaN/inf) in 'fc2.weight'")
    save_all({tmp_path / "abc.pt": {"state_dict": LeNet(4).state_dict(), "n_classes": "abc"}})
    with pytest.raises(PipelineError) as exc:
        load_classifier(tmp_path / "abc.pt")
    one_line(exc, tmp_path / "abc.pt", "'n_classes' must be an integer in [2, 100], got 'abc'")


def test_a_resume_file_with_non_finite_weights_is_not_resumed(tmp_path, capsys):
    from satground.harness.resume import Resumable
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    generator = torch.Generator().manual_seed(0)
    first = Resumable(tmp_path, "train", model, optimizer, generator, ["data"])
    first.save(2, {"curves": []})
    saved = torch.load(first.path, weights_only=True)
    saved["model"]["weight"][0, 0] = float("nan")
    torch.save(saved, first.path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert Resumable(tmp_path, "train", model, optimizer, generator, ["data"]).restore() == (0, None)
    assert "holds non-finite weights" in capsys.readouterr().out
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


# ---------------------------------------------------------------------------------------------
# 8. degenerate digit sources


def test_a_digit_source_without_some_digit_is_refused():
    images = np.zeros((12, 28, 28), np.uint8)
    labels = np.array([1, 1, 1, 2, 2, 2, 3, 3, 3, 5, 5, 5], np.uint8)  # no 4
    with pytest.raises(PipelineError) as exc:
        split_image_pools(images + np.arange(12)[:, None, None].astype(np.uint8), labels, 2, 0.3, 0)
    one_line(exc, "digit 4", "0 image(s)")


def test_a_lenet_file_round_trips_under_safe_loading(tmp_path):
    save_classifier(LeNet(4), tmp_path / "classifier.pt")
    assert load_classifier(tmp_path / "classifier.pt").n_classes == 4
    assert isinstance(load_torch(tmp_path / "classifier.pt"), dict)


def test_an_error_after_dvclive_opened_is_one_line_and_exit_1(tmp_path):
    # a stage that fails mid-training, its dvclive logger open: one line, no shutdown noise
    import subprocess
    import sys

    script = tmp_path / "stage.py"
    script.write_text(
        "from satground.harness.stage import run_stage\n"
        "from satground.harness.io import PipelineError\n"
        "from satground.harness.tracking import StageReport\n"
        "def main():\n"
        f"    report = StageReport({str(tmp_path / 'live')!r})\n"
        "    report.log_epoch(1, {'loss': 1.0})\n"
        "    raise PipelineError('train 3: loss is not finite (nan) at batch 7 of 50')\n"
        "run_stage(main)\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 1
    assert result.stderr.splitlines() == ["error: train 3: loss is not finite (nan) at batch 7 of 50"]


@pytest.mark.parametrize("text, problem", [
    ("a: &x [1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &y [*x, *x, *x, *x, *x, *x, *x, *x, *x]\nc: [*y, *y, *y]\n",
     "line 2: YAML aliases (*x) are refused"),
    ("seed: 0\n" + "#" * (1 << 20) + "\n", "more than a params file holds"),
    (b"\xff\xfe\x00seed", "not a text file"),
])
def test_a_hostile_params_file_is_refused_before_it_is_built(tmp_path, text, problem):
    """A params file pulled from a colleague: aliases that expand (a 'billion laughs'), a huge
    file or a binary one are refused in one line naming the file, before anything is built."""
    path = tmp_path / "params.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(PipelineError) as exc:
        load_params(path)
    one_line(exc, path, problem)


def test_importing_satground_sets_up_torch_vector_math_before_any_threaded_call():
    """A process's first call into MKL's vector math on two threads at once could come out wrong
    (docs/reliability.md); `import satground` makes that first call on its own thread. MKL then
    holds the mode torch's calls leave behind (denormals kept, 0x140000), which `import torch`
    alone does not set: the control shows the probe can tell the two."""
    probe = ("import ctypes, sys\n"
             "from pathlib import Path\n"
             "import torch\n"
             "library = Path(torch.__file__).parent / 'lib' / 'libtorch_cpu.so'\n"
             "mode = getattr(ctypes.CDLL(str(library)), 'vmlGetMode', None) if library.is_file() else None\n"
             "if mode is None:\n"
             "    sys.exit(3)\n"
             "if sys.argv[1] == 'satground':\n"
             "    import satground\n"
             "print(mode() & 0x3C0000)\n")
    modes = {}
    for first in ("torch", "satground"):
        done = subprocess.run([sys.executable, "-c", probe, first], capture_output=True, text=True)
        if done.returncode == 3:
            pytest.skip("this torch build has no MKL vector math to set up")
        assert done.returncode == 0, done.stderr
        modes[first] = int(done.stdout)
    assert modes == {"torch": 0, "satground": 0x140000}
