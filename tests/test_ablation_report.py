"""The Figure 5 report reads the right numbers out of dvc.api.exp_show's rows, and only the
sweep's own experiments; the paired table (scripts/paired_table.py) reads our rows of results
tables; the dev pairs (scripts/dev_pairs.py) read records' dev scores alone."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ablation_report", REPO / "scripts" / "ablation_report.py")
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

KEYS = ["seed", "data.board_size", "data.seed", "data.n_train", "cluster.method", "cluster.seed",
        "distill.checkpoint", "distill.mislabel", "train.epochs"]


def run(name, clustering, board, grounding=0.25, checkpoint="final", mislabel=0.0, method="umap",
        n_train=2000, epochs=8, typ="branch_commit", state="Success"):
    """One row as dvc.api.exp_show gives it: flat, metrics and params by name."""
    return {"Experiment": name, "rev": (name or "")[:7], "typ": typ, "State": state,
            "classifier_dev_accuracy": clustering, "cluster_dev_accuracy": 0.97, "ground_val_blank_cells": grounding,
            "perm_right": bool(board), "boards": board, "boards_pr": board,
            "seed": 0, "data.seed": 0, "data.board_size": 2, "data.n_train": n_train, "cluster.method": method,
            "cluster.seed": 0, "distill.checkpoint": checkpoint, "distill.mislabel": mislabel,
            "train.epochs": epochs}


def workspace(clustering=0.97, board=0.85):
    return dict(run(None, clustering, board, typ="baseline", state=None), rev="workspace")


def names(rows):
    return [r["experiment"] for r in rows]


def test_mislabel_sweep_keeps_its_finished_experiments_and_the_workspace():
    show = [
        workspace(),
        dict(run(None, 0.97, 0.85, typ="baseline", state=None), rev="abc1234"),  # HEAD's row
        run("mis-10", 0.88, 0.60, mislabel=0.1),
        run("mis-20", 0.79, 0.0, mislabel=0.2),
        run("mis-30", 0.0, 0.0, mislabel=0.3, state="Queued") | {"classifier_dev_accuracy": None, "boards": None},
        # running: its folder still holds the baseline's metrics, which must not be read
        run("mis-40", 0.70, 0.85, mislabel=0.4, state="Running"),
        # other experiments: another profile's data, another training setting, another sweep
        run("smoke", 0.92, 0.0, n_train=200),
        run("longer", 0.97, 0.90, epochs=40),
        run("ckpt-4", 0.50, 0.0, checkpoint=4, method="infogan"),
    ]
    rows = report.rows(show, "mislabel", KEYS)
    assert names(rows) == ["workspace", "mis-10", "mis-20"]
    assert rows[1]["clustering_accuracy"] == 0.88 and rows[1]["board_accuracy"] == 0.60
    assert rows[1]["mislabel"] == 0.1 and rows[1]["teacher_accuracy"] == 0.97
    assert rows[2]["grounding_cell_accuracy"] == 0.25 and rows[2]["permutation_correct"] is False
    # a workspace whose params changed after its last run pairs them with older metrics: no point
    assert names(report.rows(show, "mislabel", KEYS, workspace_point=False)) == ["mis-10", "mis-20"]


def test_checkpoint_sweep_keeps_only_checkpoint_runs_on_the_same_data():
    show = [
        workspace(),
        run("ckpt-0", 0.30, 0.0, checkpoint=0, method="infogan"),
        run("ckpt-4", 0.91, 0.80, checkpoint=4, method="infogan"),
        run("mis-10", 0.88, 0.60, mislabel=0.1),
        run("smoke-ckpt", 0.5, 0.0, checkpoint=2, method="infogan", n_train=200),
    ]
    rows = report.rows(show, "checkpoint", KEYS)
    assert names(rows) == ["ckpt-0", "ckpt-4"]
    assert [r["checkpoint"] for r in rows] == [0, 4]


def test_a_metric_shared_by_two_files_is_read_under_its_file_name():
    row = {"metrics/a/metrics.json:boards": 0.5, "classifier_dev_accuracy": 0.9}
    assert report.column(row, "boards") == 0.5 and report.column(row, "classifier_dev_accuracy") == 0.9
    assert report.column(row, "missing") is None


def seeded(name, seed, board, **changes):
    return run(name, 0.97, board, **changes) | {"seed": seed, "data.seed": seed, "cluster.seed": seed,
                                                 "blank_boards": board + 0.1}


def test_seeds_sweep_keeps_runs_that_change_only_seeds_and_reports_mean_and_std():
    show = [workspace(board=0.60) | {"blank_boards": 0.70}, seeded("seed1", 1, 0.70), seeded("seed2", 2, 0.80),
            seeded("other-data", 3, 0.90, n_train=200),  # seeds and another setting: not a seed run
            run("mis-10", 0.88, 0.60, mislabel=0.1)]
    rows = report.rows(show, "seeds", KEYS)
    assert names(rows) == ["workspace", "seed1", "seed2"]
    text = report.seeds_table(report.pd.DataFrame(rows))
    assert "per seed (0, 1, 2) |" in text
    assert "| exact, as trained (`boards`) | 70.0 +- 10.0 | 60.0, 70.0, 80.0 |" in text
    assert "| every blank right, as trained (`blank_boards`) | 80.0 +- 10.0 |" in text
    assert "boards_checked" not in text  # a metric the runs lack gets no row


def record(folder, seed, boards, **params):
    """A kept record (satground/harness/records.py's format): params.yaml and the metrics.json bundle."""
    tree = {"seed": seed, "data": {"seed": seed, "n_train": params.get("n_train", 2000)},
            "cluster": {"seed": seed}, "train": {"epochs": 8}}
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(yaml.safe_dump(tree))
    stages = {"evaluate": {"metrics": {"boards": boards, "blank_boards": boards + 0.1, "perm_right": True}},
              "distill": {"metrics": {"classifier_dev_accuracy": 0.98}}}
    (folder / "metrics.json").write_text(json.dumps({"stages": stages, "tables": {}}))
    return folder


def add_seconds(folder, stage, seconds):
    """A stage's wall seconds, as keep_results bundles timing.json."""
    data = json.loads((folder / "metrics.json").read_text())
    data["stages"].setdefault(stage, {})["seconds"] = seconds
    (folder / "metrics.json").write_text(json.dumps(data))


def test_seeds_sweep_reads_kept_records_from_other_clones(tmp_path):
    folders = [record(tmp_path / "cpu9", 0, 0.6), record(tmp_path / "seed1", 1, 0.8),
               record(tmp_path / "smoke", 2, 0.9, n_train=200)]  # other data: not a seed run
    rows = report.rows([report.record_row(f) for f in folders], "seeds", KEYS)
    assert names(rows) == ["cpu9", "seed1"]
    assert rows[1]["seed"] == 1 and rows[1]["clustering_accuracy"] == 0.98
    text = report.seeds_table(report.pd.DataFrame(rows))
    assert "| exact, as trained (`boards`) | 70.0 +- 14.1 | 60.0, 80.0 |" in text


def test_a_record_kept_before_a_key_existed_runs_that_keys_default(tmp_path):
    older = record(tmp_path / "seed0", 0, 0.6)
    newer = record(tmp_path / "seed1", 1, 0.8)
    params = yaml.safe_load((newer / "params.yaml").read_text())
    params["reread"] = {"round_satnet": "fresh", "round_epochs": None}  # the schema's defaults
    (newer / "params.yaml").write_text(yaml.safe_dump(params))
    keys = KEYS + ["reread.round_satnet", "reread.round_epochs"]
    assert names(report.rows([report.record_row(f) for f in (older, newer)], "seeds", keys)) == ["seed0", "seed1"]
    params["reread"]["round_satnet"] = "keep"  # another setting: not a seed of the same run
    (newer / "params.yaml").write_text(yaml.safe_dump(params))
    assert names(report.rows([report.record_row(f) for f in (older, newer)], "seeds", keys)) == ["seed0"]


def test_a_record_kept_before_a_key_existed_runs_its_first_default_not_todays(tmp_path):
    """`reread.width` came in at 32 and became 16: a record without the key ran 32, so it is a seed
    of a record at 32 and not of one at 16."""
    older = record(tmp_path / "seed0", 0, 0.6)
    newer = record(tmp_path / "seed1", 1, 0.8)
    params = yaml.safe_load((newer / "params.yaml").read_text())
    keys = KEYS + ["reread.width"]
    for width, seeds in ((32, ["seed0", "seed1"]), (16, ["seed0"])):
        params["reread"] = {"width": width}
        (newer / "params.yaml").write_text(yaml.safe_dump(params))
        assert names(report.rows([report.record_row(f) for f in (older, newer)], "seeds", keys)) == seeds


def test_seeds_table_gives_the_times_of_timed_records_on_one_machine(tmp_path):
    folders = [record(tmp_path / f"seed{seed}", seed, 0.6) for seed in range(3)]
    for folder, seconds in zip(folders, (1800, 1680, 1920)):
        (folder / "run.json").write_text(f'{{"wall_seconds": {seconds}, "machine": "AMD EPYC"}}')
    rows = lambda: report.rows([report.record_row(f) for f in folders], "seeds", KEYS)  # noqa: E731
    text = report.seeds_table(report.pd.DataFrame(rows()))
    assert "| whole run, minutes (`run.json`: AMD EPYC) | 30.0 +- 2.0 | 30.0, 28.0, 32.0 |" in text
    assert "stage" not in text  # no record has a stage's timing.json
    for folder, seconds in zip(folders, (800, 820, 840)):
        add_seconds(folder, "train", seconds)
    text = report.seeds_table(report.pd.DataFrame(rows()))
    assert "| stage `train`, seconds | 820.0 +- 20.0 | 800.0, 820.0, 840.0 |" in text
    (folders[2] / "run.json").write_text('{"wall_seconds": 1920, "machine": "Xeon"}')
    text = report.seeds_table(report.pd.DataFrame(rows()))
    assert "| whole run, minutes (`run.json`: 2 different machines) | n/a | 30.0, 28.0, 32.0 |" in text
    assert "stage" not in text
    (folders[2] / "run.json").write_text('{"machine": "Xeon"}')  # a partial run: no wall time
    assert "whole run" not in report.seeds_table(report.pd.DataFrame(rows()))


def test_boundary_shift_report_plots_the_final_model_beside_the_model_as_trained(tmp_path, monkeypatch):
    folders = []
    for shift, clustering, trained, final in ((0.0, 0.98, 0.6, 0.95), (0.2, 0.80, 0.0, 0.0), (0.1, 0.90, 0.4, 0.9)):
        folder = record(tmp_path / f"shift{shift}", 0, trained)
        params = yaml.safe_load((folder / "params.yaml").read_text()) | {"distill": {"boundary_shift": shift}}
        (folder / "params.yaml").write_text(yaml.safe_dump(params))
        data = json.loads((folder / "metrics.json").read_text())
        data["stages"]["evaluate"]["metrics"]["boards_checked"] = final
        data["stages"]["distill"]["metrics"]["classifier_dev_accuracy"] = clustering
        (folder / "metrics.json").write_text(json.dumps(data))
        folders.append(folder)
    csv, plot = tmp_path / "ablation.csv", tmp_path / "ablation.png"
    monkeypatch.setattr(report.sys, "argv", ["ablation_report.py", "--sweep", "boundary_shift", "--csv", str(csv),
                                             "--plot", str(plot), "--records", *map(str, folders)])
    figures = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: figures.append(fig))
    assert report.main() == 0
    labels = [text.get_text() for text in figures[0].axes[0].get_legend().get_texts()]
    assert labels[:2] == ["exact boards, as trained", "exact boards, final (re-read + check)"]
    table = report.pd.read_csv(csv)
    assert list(table.boundary_shift) == [0.2, 0.1, 0.0]  # by clustering accuracy
    assert list(table.boards_checked) == [0.0, 0.9, 0.95] and list(table.board_accuracy) == [0.0, 0.4, 0.6]


def test_boundary_shift_report_plots_each_rounds_value_and_merges_an_earlier_report(tmp_path, monkeypatch):
    earlier = tmp_path / "earlier.csv"  # another clone's sweep, written before the rounds column
    report.pd.DataFrame({"experiment": ["a", "b"], "boundary_shift": [0.0, 0.4], "clustering_accuracy": [0.98, 0.73],
                         "board_accuracy": [0.5, 0.01], "boards_checked": [0.97, 0.03],
                         "grounding_cell_accuracy": [0.3, 0.19]}).to_csv(earlier, index=False)
    folder = record(tmp_path / "shift0.4_rounds2", 0, 0.01)
    params = yaml.safe_load((folder / "params.yaml").read_text()) | {"distill": {"boundary_shift": 0.4},
                                                                      "reread": {"rounds": 2}}
    (folder / "params.yaml").write_text(yaml.safe_dump(params))
    data = json.loads((folder / "metrics.json").read_text())
    data["stages"]["evaluate"]["metrics"]["boards_checked"] = 0.95
    data["stages"]["distill"]["metrics"]["classifier_dev_accuracy"] = 0.73
    (folder / "metrics.json").write_text(json.dumps(data))
    csv, plot = tmp_path / "ablation.csv", tmp_path / "ablation.png"
    monkeypatch.setattr(report.sys, "argv", ["ablation_report.py", "--sweep", "boundary_shift", "--csv", str(csv),
                                             "--plot", str(plot), "--records", str(folder), "--merge", str(earlier)])
    figures = []
    monkeypatch.setattr(report, "save_figure", lambda fig, path: figures.append(fig))
    assert report.main() == 0
    ax = figures[0].axes[0]
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels[:3] == ["exact boards, as trained", "exact boards, final (re-read + check)",
                          "exact boards, final (re-read + check), reread.rounds 2"]
    assert list(ax.lines[0].get_ydata()) == [1.0, 50.0]  # as trained: once a shift, from the rounds-1 runs
    assert list(ax.lines[2].get_ydata()) == [95.0]
    table = report.pd.read_csv(csv)
    assert sorted(zip(table.boundary_shift, table["rounds"])) == [(0.0, 1), (0.4, 1), (0.4, 2)]
    monkeypatch.setattr(report.sys, "argv", ["ablation_report.py", "--sweep", "boundary_shift", "--csv", str(csv),
                                             "--records", str(folder), "--merge", str(tmp_path / "absent.csv")])
    assert report.main() == 1


def test_a_folder_that_is_no_record_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(report.sys, "argv", ["ablation_report.py", "--sweep", "seeds", "--records",
                                             str(tmp_path)])
    assert report.main() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'params.yaml'}: not found" in err


def results_md(path, reread, reread_check):
    """A results table as evaluate writes it: a baseline row and two of ours."""
    head = ("| model | data | proofreader | board_accuracy_pct | blank_board_accuracy_pct | valid_grid_pct |\n"
            "|:--|:--|:--|:--|:--|:--|\n")
    rows = [("Original SATNet", "no", 1.0, 2.0), ("Ours + re-read", "no", *reread),
            ("Ours + re-read + check", "yes", *reread_check)]
    path.write_text(head + "".join(f"| {m} | ungrounded | {p} | {a} | {b} | 0.0 |\n" for m, p, a, b in rows))
    return str(path)


def test_paired_table_gives_mean_std_and_the_gain_per_seed(tmp_path):
    off = [results_md(tmp_path / f"off{i}.md", (60 + i, 70), (80, 90 - i)) for i in range(3)]
    on = [results_md(tmp_path / f"on{i}.md", (62 + 2 * i, 70), (80, 90)) for i in range(3)]
    script = [sys.executable, str(REPO / "scripts" / "paired_table.py")]
    out = subprocess.run(script + ["--off", *off, "--on", *on], capture_output=True, text=True, check=True).stdout
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in out.splitlines()[2:]}
    assert len(rows) == 4  # our two rows x two columns; the baseline's left out
    assert rows["exact, Ours + re-read, proofreader no"] == ["61.0 +- 1.0", "64.0 +- 2.0", "+2.0, +3.0, +4.0 |"]
    assert rows["every blank right, Ours + re-read + check, proofreader yes"][2] == "+0.0, +1.0, +2.0 |"
    bad = subprocess.run(script + ["--off", *off[:2], "--on", *on], capture_output=True, text=True)
    assert bad.returncode != 0 and "same number of tables" in bad.stderr
    (tmp_path / "junk.md").write_text("no table here\n")
    bad = subprocess.run(script + ["--off", off[0], str(tmp_path / "junk.md"), "--on", *on[:2]],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "junk.md: not a results table" in bad.stderr


def dev_record(folder, final, as_trained, conflicts, folds=16):
    """A kept record as dev_pairs reads it: params (its evaluate's check folds), the train stage's
    info, dev_choices.csv (the final model also scored at the other folds, which must not be read)."""
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(f"seed: 0\nevaluate:\n  check_folds: {folds}\n")
    (folder / "metrics.json").write_text(json.dumps(
        {"stages": {"train": {"info": {"tune": {"dev_given_conflicts": conflicts}}}}}))
    other = 36 if folds == 16 else 16
    (folder / "dev_choices.csv").write_text(
        "model,views,check_folds,dev_exact_pct,dev_every_blank_pct\n"
        f"solver_reread,1,{folds},0.0,1.0\nsolver_reread,7,{folds},0.0,{final}\nsolver_reread,7,0,0.0,3.0\n"
        f"solver_reread,7,{other},0.0,50.0\n"
        f"solver,1,0,0.0,{as_trained}\nsolver,1,16,0.0,99.0\nsolver,7,16,0.0,2.0\n")
    return str(folder)


def test_dev_pairs_gives_the_paired_gain_of_each_label_free_criterion(tmp_path):
    """Final: re-read, 7 views, checked in the record's own folds (16 off, 36 on: the other count's
    50.0 is never read); as trained: 1 view, unchecked (the checked row's 99.0 is never read), as
    the test's rows score them."""
    off = [dev_record(tmp_path / f"off{i}", 90 + i, 80, 0.01) for i in range(3)]
    on = [dev_record(tmp_path / f"on{i}", 91 + 2 * i, 80 - i, 0.01 - 0.002 * i, folds=36) for i in range(3)]
    script = [sys.executable, str(REPO / "scripts" / "dev_pairs.py")]
    out = subprocess.run(script + ["--off", *off, "--on", *on], capture_output=True, text=True, check=True).stdout
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in out.splitlines()[2:]}
    final, trained, conflicts = rows.values()
    assert final[:4] == ["91.00", "93.00", "+2.00 +- 0.58", "+1.00, +2.00, +3.00"] and final[4] == "3 of 3 |"
    assert trained[2:4] == ["-1.00 +- 0.58", "+0.00, -1.00, -2.00"]
    assert conflicts[:3] == ["1.00", "0.80", "-0.20 +- 0.12"]
    bad = subprocess.run(script + ["--off", *off[:2], "--on", *on], capture_output=True, text=True)
    assert bad.returncode != 0 and "the same seeds" in bad.stderr
    stopped = tmp_path / "stopped"  # runs stopped after train: the unchecked as-trained row alone
    for i in range(3):
        (stopped / str(i)).mkdir(parents=True)
        (stopped / str(i) / "dev_choices.csv").write_text(
            f"model,views,check_folds,dev_every_blank_pct\nsolver,1,0,{78 + i}\nsolver,1,16,99.0\n")
    out = subprocess.run(script + ["--off", *(str(stopped / str(i)) for i in range(3)), "--on", *on],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[2].startswith("| EBR, as trained (1 view, no check) | 79.00 | 79.00 | +0.00 +- 1.15 |")
    assert len(out) == 5 and out[4].startswith("Not in every folder, so not paired: EBR, final")
    Path(on[1], "dev_choices.csv").unlink()
    bad = subprocess.run(script + ["--off", *off, "--on", *on], capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1 and "on1/dev_choices.csv: no dev score" in bad.stderr
