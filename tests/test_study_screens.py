"""The label-free screens of studies/ apply the rules their docstrings fix before the runs:
cluster_constants (a value wins only below the default on both peer-conflict rates, on every
seed, by more than the re-seed spread) and ground_settings (a differing permutation is flagged);
both read their values through common.parse_setting."""
import pytest

from script_import import script


def study(name: str):
    return script("studies", name)


def test_parse_setting_nests_dotted_keys_and_reads_numbers():
    common = study("common")
    assert common.parse_setting("confidence=0.7,augment.shift=0,cnn_lr=3e-3") == {
        "confidence": 0.7, "augment": {"shift": 0}, "cnn_lr": 0.003}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        common.parse_setting("confidence")


def rows(seed, default, reseed, value):
    return [{"seed": seed, "value": name, "train_conflicts": t, "dev_conflicts": d,
             "report_dev_accuracy": 0.98, "fit_seconds": 100.0}
            for name, (t, d) in (("default", default), ("reseed", reseed), ("x=1", value))]


@pytest.mark.parametrize("value_seed1, verdict", [
    ((0.0030, 0.0020), "wins"),      # below the default by more than the re-seed spread on both rates
    ((0.0030, 0.0049), "stands"),    # dev within the spread
    ((0.0060, 0.0020), "stands"),    # train above the default
])
def test_cluster_constants_rule(tmp_path, value_seed1, verdict):
    screen = study("cluster_constants")
    path = tmp_path / "runs.jsonl"
    common = study("common")
    common.append_rows(path, rows(0, (0.0050, 0.0050), (0.0052, 0.0049), (0.0030, 0.0020))
                       + rows(1, (0.0050, 0.0050), (0.0045, 0.0047), value_seed1))
    line = next(l for l in screen.table(path).splitlines() if l.startswith("| x=1 "))
    assert line.rstrip(" |").endswith(verdict)


def test_cluster_constants_incomplete_without_every_seed(tmp_path):
    screen = study("cluster_constants")
    path = tmp_path / "runs.jsonl"
    study("common").append_rows(path, rows(0, (0.005, 0.005), (0.005, 0.005), (0.001, 0.001))
                                + rows(1, (0.005, 0.005), (0.005, 0.005), (0.001, 0.001))[:2])
    line = next(l for l in screen.table(path).splitlines() if l.startswith("| x=1 "))
    assert line.rstrip(" |").endswith("incomplete")


def test_ground_settings_flags_another_permutation(tmp_path):
    screen = study("ground_settings")
    path = tmp_path / "runs.jsonl"
    base = {"seed": 0, "val_blank_cells": 0.31, "margin": 0.026, "epochs_run": 2, "wall_seconds": 60}
    study("common").append_rows(path, [{**base, "value": "default", "permutation": [1, 0, 2]},
                                       {**base, "value": "a=1", "permutation": [1, 0, 2]},
                                       {**base, "value": "b=2", "permutation": [0, 1, 2]}])
    table = screen.table(path).splitlines()
    assert "| a=1 | yes |" in next(l for l in table if "a=1" in l)
    assert "| b=2 | **no** |" in next(l for l in table if "b=2" in l)


def verify_run(tmp_path, seed: int, right: dict[str, int], boards: int = 200, seconds: dict | None = None) -> str:
    """One seed's dev_choices rows and board flags: each verify label right on its first
    `right[label]` boards (so a better row's boards include a worse row's), `seconds` its rows'."""
    key = "model=solver_reread proofreader=no solve_sweeps=40 views=7 check_folds=16 starts=4 " \
          "check_weight=1.0 check_rounds=4 check_context=givens verify="
    flags = {key + label: "1" * n + "0" * (boards - n) for label, n in right.items()}
    rows = tmp_path / f"seed{seed}.csv"
    rows.write_text("verify,dev_every_blank_pct,seconds\n" + "".join(
        f"{label},{100 * n / boards},{(seconds or {}).get(label, '')}\n" for label, n in right.items()))
    (tmp_path / f"seed{seed}.json").write_text(__import__("json").dumps(flags))
    return f"{rows}:{tmp_path / f'seed{seed}.json'}"


def test_seed_rule_takes_the_cheapest_near_the_best_and_only_a_clear_gain(tmp_path, capsys):
    rule = study("seed_rule")
    runs = [verify_run(tmp_path, s, {"": 90, "8 x1 r2": 130 + s, "16 x1 r4": 131 + s}) for s in range(3)]
    rule.main(["--runs", *runs, "--base", ""])
    assert "winner '8 x1 r2'" in capsys.readouterr().out.splitlines()[-1]  # 0.5 point below the best, 4x cheaper
    rule.main(["--runs", *runs, "--base", "", "--near", "0.1"])
    last = capsys.readouterr().out.splitlines()[-1]
    assert "winner '16 x1 r4'" in last and last.endswith("TAKEN")
    # the same mean gain, but one seed loses: more than two standard errors are not cleared
    runs = [verify_run(tmp_path, s, {"": 100, "8 x1 r2": n}) for s, n in enumerate((160, 160, 80))]
    rule.main(["--runs", *runs, "--base", ""])
    assert capsys.readouterr().out.splitlines()[-1].endswith("not taken")
    assert rule.cost("16 x1 r4 t3", "passes") == 4 * (16 * 2 + 1) and rule.cost("16 x1 r4", "tries") == 64


def test_seed_rule_costs_a_settling_verify_by_its_seconds_and_names_rows_exactly(tmp_path, capsys):
    """A settling verify's passes are not known before it runs: --cost seconds takes the rows'
    measured seconds (mean over the runs), and a row's name does not match a longer one's."""
    rule = study("seed_rule")
    right = {"16 x1 r8 t4": 100, "16 x1 r8 t4 p1": 150, "16 x1 r16 t4 p2": 151}
    runs = [verify_run(tmp_path, s, right, seconds={"16 x1 r8 t4": 250, "16 x1 r8 t4 p1": 200 + s,
                                                     "16 x1 r16 t4 p2": 180}) for s in range(3)]
    rule.main(["--runs", *runs, "--base", "16 x1 r8 t4", "--cost", "seconds"])
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("winner '16 x1 r16 t4 p2'") and "+25.50" in out[-1] and out[-1].endswith("TAKEN")
    assert any(line.startswith("| 16 x1 r8 t4 p1 |") and line.endswith("| 201.0 |") for line in out)
    with pytest.raises(SystemExit, match="--cost seconds"):
        rule.cost("16 x1 r8 t4 p1", "passes")
    flags = {"verify=16 x1 r8 t4 p1": "1", "verify=16 x1 r8 t4": "0"}
    assert rule.cost("16 x1 r8 t4 settle", "seconds", {"16 x1 r8 t4 settle": 99.0}) == 99.0  # rule 9's rows
    assert study("paired_boards").row(flags, "verify=16 x1 r8 t4", "x") == "0"


def test_seed_rule_reads_one_workspace_from_several_files(tmp_path, capsys):
    rule = study("seed_rule")
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    runs = []
    for s in range(3):  # each seed's verify-off row in one pair of files, the candidate's in another
        rows_a, flags_a = verify_run(tmp_path / "a", s, {"": 90}).split(":")
        rows_b, flags_b = verify_run(tmp_path / "b", s, {"8 x1 r2": 130 + s}).split(":")
        runs.append(f"{rows_a},{rows_b}:{flags_a},{flags_b}")
    rule.main(["--runs", *runs, "--base", ""])
    assert capsys.readouterr().out.splitlines()[-1].startswith("winner '8 x1 r2'")


def sure_where(*cells):
    """A stub SATNet on 3-cell, 2-digit boards, (B, C*K) -> (B, C*K): every cell sure of digit 0
    where each of `cells` shows digit 1, else torn between the two."""
    import torch

    def solver(shown, is_input):
        shown = shown.reshape(len(shown), 3, 2)
        sure = torch.stack([shown[:, cell, 1] > 0.5 for cell in cells]).all(0)
        out = torch.where(sure[:, None, None], torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5]))
        return out.expand(-1, 3, -1).reshape(len(shown), -1)
    return solver


def test_verify_misses_weighs_each_chosen_try_alone():
    """try_gains: one try a chosen given, its log odds against the first reading and SATNet's
    gain in surety over the board as read (sure only where cell 0 shows digit 1)."""
    import math

    import torch
    misses = study("verify_misses")
    checked = torch.tensor([[[0.8, 0.2], [0.9, 0.1], [0.5, 0.5]],
                            [[0.6, 0.4], [0.7, 0.3], [0.5, 0.5]]])
    given = torch.tensor([[True, True, False], [True, True, False]])
    chosen = torch.tensor([[True, True, False], [True, False, False]])
    odds, gains, as_read = misses.try_gains(sure_where(0), checked, given, chosen, torch.ones(2, 3, dtype=torch.long))
    assert torch.allclose(as_read, torch.full((2,), math.log(0.5)))
    # board 0 tries cells 0 and 1, board 1 cell 0; the order is by try, then by board
    assert torch.allclose(odds, torch.tensor([math.log(0.2 / 0.8), math.log(0.4 / 0.6), math.log(0.1 / 0.9)]))
    assert torch.allclose(gains, torch.tensor([-math.log(0.5), -math.log(0.5), 0.0]))


def test_verify_misses_scores_a_pair_alone_and_together():
    """pair_scores: SATNet sure only where cells 0 and 1 both show digit 1, so neither try alone
    wins and the pair does; a board with one chosen given has no pair."""
    import math

    import torch
    misses = study("verify_misses")
    checked = torch.tensor([[[0.55, 0.45], [0.6, 0.4], [0.5, 0.5]],
                            [[0.55, 0.45], [0.6, 0.4], [0.5, 0.5]]])
    given = torch.tensor([[True, True, False], [True, True, False]])
    chosen = torch.tensor([[True, True, False], [True, False, False]])
    first, other, both = misses.pair_scores(sure_where(0, 1), checked, given, chosen,
                                            torch.ones(2, 3, dtype=torch.long))
    odds0, odds1 = math.log(0.45 / 0.55), math.log(0.4 / 0.6)
    assert torch.allclose(first, torch.tensor([odds0])) and torch.allclose(other, torch.tensor([odds1]))
    assert torch.allclose(both, torch.tensor([odds0 + odds1 - math.log(0.5)]))
    assert first.item() < 0 and other.item() < 0 < both.item()


def test_paired_boards_compares_rows_of_two_workspaces(tmp_path, capsys):
    """--new-flags: the new row from another workspace's files, board by board against the base's."""
    paired = study("paired_boards")
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    base = [verify_run(tmp_path / "a", s, {"16 x1 r8 t4": 100}).split(":")[1] for s in range(3)]
    better = [verify_run(tmp_path / "b", s, {"16 x1 r8 t4": 130 + s}).split(":")[1] for s in range(3)]
    paired.main(["--flags", *base, "--new-flags", *better, "--base", "16 x1 r8 t4", "--new", "16 x1 r8 t4"])
    out = capsys.readouterr().out.splitlines()
    assert "| 200 | 30 | 0 | +15.0 |" in out[2] and out[-1].startswith("mean gain +15.50") and out[-1].endswith("TAKEN")
    paired.main(["--flags", *base, "--new-flags", *base, "--base", "16 x1 r8 t4", "--new", "16 x1 r8 t4"])
    assert capsys.readouterr().out.splitlines()[-1].endswith("not taken")  # the same rows: no gain
    with pytest.raises(SystemExit, match="2 files for 3"):
        paired.main(["--flags", *base, "--new-flags", *better[:2], "--base", "x", "--new", "x"])
