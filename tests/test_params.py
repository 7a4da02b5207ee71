"""The parameter schema (satground/harness/params.py) owns every parameter: profiles are overlays of it,
params.yaml is what `scripts/profile.py` writes, and the stages hold no defaults of their own."""
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from satground.boards import mnist, sudoku
from satground.clustering import CLUSTERERS
from satground.solver.grounding import ASSIGNMENTS, PERMUTATION_SOURCES
from satground.harness.io import PipelineError
from satground.solver.losses import APPROXMAX, LOSSES
from satground.harness.params import (DEFAULT_PROFILE, PROFILES, RULE_READING_CLUSTERERS, SEED_MAX, SEEDED_SECTIONS,
                                      FIRST_DEFAULTS, Augment, Params, Reread, compose, defaults_of_a_record,
                                      schema_defaults, flat_keys, known_keys, load_params, params_text, parse_params,
                                      profile_names)

REPO = Path(__file__).resolve().parents[1]


def test_params_yaml_is_the_default_profile_as_written():
    assert (REPO / "params.yaml").read_text() == params_text(DEFAULT_PROFILE)


def test_one_default_the_schemas_is_the_committed_run():
    """The schema's defaults are the default profile's values: `dvc repro` on the committed
    params.yaml runs 9x9 Sudoku, a stage's --help shows what runs, and the 4x4 first look is a
    profile like the others."""
    assert compose(DEFAULT_PROFILE) == schema_defaults()
    assert parse_params(compose(DEFAULT_PROFILE)) == Params()
    assert compose(DEFAULT_PROFILE)["data"]["board_size"] == 3
    assert compose("4x4")["data"]["board_size"] == 2
    assert not (PROFILES / f"{DEFAULT_PROFILE}.yaml").exists()


def test_first_defaults_name_schema_keys_whose_default_has_changed():
    """FIRST_DEFAULTS holds only keys of the schema, each with a first default other than today's
    (else a record without the key runs today's default, as it should)."""
    today = schema_defaults()
    for section, keys in FIRST_DEFAULTS.items():
        for key, first in keys.items():
            assert key in today[section] and today[section][key] != first, f"{section}.{key}"
    assert defaults_of_a_record()["reread"]["width"] == 32 != schema_defaults()["reread"]["width"]
    # cluster.cnn_width went 32 -> 16 -> 32: every record either names it or ran today's 32
    assert "cluster" not in FIRST_DEFAULTS and defaults_of_a_record()["cluster"]["cnn_width"] == 32


def test_stage_seeds_follow_the_top_level_seed_unless_set():
    """One key is a new seed everywhere (`dvc exp run -S seed=3`); a stage seed written out
    still wins, so a study can vary one stage's seed alone."""
    params = parse_params({"seed": 3})
    assert [getattr(params, s).seed for s in SEEDED_SECTIONS] == [3, 3, 3, 3]
    assert compose(DEFAULT_PROFILE)["data"]["seed"] is None
    params = parse_params({"seed": 3, "cluster": {"seed": 5}})
    assert (params.data.seed, params.cluster.seed, params.distill.seed, params.reread.seed) == (3, 5, 3, 3)
    with pytest.raises(PipelineError, match="'cluster.seed' \\(or the 'seed' it follows\\) \\+ 'cluster.restarts'"):
        parse_params({"seed": SEED_MAX, "cluster": {"restarts": 2}})


@pytest.mark.parametrize("name", profile_names())
def test_every_profile_composes_into_valid_params(name):
    params = parse_params(compose(name), name)
    assert sorted(flat_keys(dataclasses.asdict(params))) == sorted(known_keys())


@pytest.mark.parametrize("name", [n for n in profile_names() if n != DEFAULT_PROFILE])
def test_a_profile_holds_only_what_it_changes(name):
    """Every profile changes the default alone: none extends another."""
    changes = yaml.safe_load((PROFILES / f"{name}.yaml").read_text())
    assert "extends" not in changes
    defaults = compose(DEFAULT_PROFILE)
    for key in flat_keys(changes):
        node = defaults
        for part in key.split("."):
            node = node[part]
        assert changes_value(changes, key) != node, f"profiles/{name}.yaml repeats the default of {key}"


def changes_value(tree: dict, key: str):
    for part in key.split("."):
        tree = tree[part]
    return tree


def test_the_profile_command_writes_what_compose_says(tmp_path):
    for folder in ("scripts", "satground", "profiles"):
        shutil.copytree(REPO / folder, tmp_path / "repo" / folder)
    for name in ("cpu9", "4x4"):
        subprocess.run([sys.executable, "scripts/profile.py", name], cwd=tmp_path / "repo", check=True,
                       capture_output=True)
        assert yaml.safe_load((tmp_path / "repo" / "params.yaml").read_text()) == compose(name)


def test_a_key_the_file_omits_takes_the_schema_default(tmp_path):
    (tmp_path / "p.yaml").write_text("train:\n  epochs: 12\n")
    params = load_params(tmp_path / "p.yaml")
    assert params.train.epochs == 12
    assert params.train.batch_size == Params().train.batch_size
    assert params.source == str(tmp_path / "p.yaml")


@pytest.mark.parametrize("text,problem", [
    ("ground: 3\n", "'ground' must be a section of keys"),
    ("data:\n  board_size: 4\n", "'data.board_size' must be one of [2, 3]"),
    ("data:\n  board_size: 2\n  givens: {mean: 16}\n", "'data.givens.mean' must be <= 15"),
    ("distill:\n  checkpoint: last\n", "'distill.checkpoint' must be 'final' or an epoch"),
    ("cluster:\n  seed: 4294967295\n  restarts: 2\n", "exceeds 4294967295"),
    ("train:\n  init_from_ground: 1\n", "'train.init_from_ground' must be bool"),
    ("train:\n  epochs: 3\n  decay_epochs: 4\n", "'train.decay_epochs' (4) exceeds 'train.epochs' (3)"),
    ("train:\n  epochs: 3\n  decay_epochs: 0\n  hints: 0.5\n  hint_epochs: 4\n",
     "'train.hint_epochs' (4) exceeds 'train.epochs' (3)"),
    ("train:\n  hints: 1.0\n", "'train.hints' must be below 1"),
    ("train:\n  rules_shown: 1.0\n", "'train.rules_shown' must lie strictly between 0 and 1"),
    ("train:\n  reground: true\n", "'train.reground' needs 'train.rules_epochs' above 0"),
    ("train:\n  epochs: 0\n  decay_epochs: 0\n", "'train.epochs' is 0 and so is 'train.rules_epochs'"),
    ("train:\n  epochs: 0\n  decay_epochs: 0\n  rules_epochs: 2\nreread:\n  rounds: 2\n",
     "'reread.rounds' 2 trains a SATNet behind each new reader for 'train.epochs' epochs, which is 0"),
    ("reread:\n  rounds: 2\n  round_epochs: 2\n",
     "'train.decay_epochs' (5) exceeds 'reread.round_epochs' (2), the rounds' SATNet epochs"),
    ("reread:\n  rounds: 2\n  round_satnet: keep\n  round_inputs: labels\n",
     "'reread.round_inputs: labels' trains the round's SATNet on the pseudo-labels"),
    ("reread:\n  reader: lenet\n  width: 32\n", "'reread.width' sizes the cnn reader's CNNs, so it needs"),
    ("reread:\n  reader: lenet\n  keep_classifier: true\n",
     "'reread.keep_classifier' needs 'reread.reader: cnn', got 'lenet'"),
    ("satnet:\n  lr: .nan\n", "'satnet.lr' must be a finite number"),
])
def test_bad_values_are_refused_in_one_line_naming_the_key(tmp_path, text, problem):
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(PipelineError) as exc:
        load_params(tmp_path / "p.yaml")
    message = str(exc.value)
    assert "\n" not in message and str(tmp_path / "p.yaml") in message and problem in message, message


# the rule switch: every setting that reads the Sudoku rules before end-to-end training
RULE_READING = [
    ("cluster:\n  method: peers\ndistill:\n  classifier: lenet\n", "'cluster.method: peers'"),
    ("cluster:\n  restarts: 2\n", "'cluster.restarts: 2'"),
    ("ground:\n  permutation: peers\n", "'ground.permutation: peers'"),
    ("ground:\n  align_inputs: true\n", "'ground.align_inputs: true'"),
]


@pytest.mark.parametrize("text,setting", RULE_READING)
def test_the_rule_switch_refuses_each_rule_reading_setting_in_one_line_naming_both_keys(tmp_path, text, setting):
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(PipelineError) as exc:
        load_params(tmp_path / "p.yaml")
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'p.yaml'}: {setting} reads the Sudoku rules")
    assert message.endswith("but 'rule_aware' is false"), message
    (tmp_path / "p.yaml").write_text("rule_aware: false\n" + text)
    with pytest.raises(PipelineError, match="'rule_aware' is false"):
        load_params(tmp_path / "p.yaml")


@pytest.mark.parametrize("text,setting", RULE_READING)
def test_with_rule_aware_each_rule_reading_setting_loads(tmp_path, text, setting):
    (tmp_path / "p.yaml").write_text("rule_aware: true\n" + text)
    params = load_params(tmp_path / "p.yaml")
    assert [found for found, _ in params.rule_reading()] == [setting.strip("'")]


def test_the_defaults_read_no_rule_and_all_rule_reading_settings_together_are_listed():
    assert not Params().rule_aware and Params().rule_reading() == []
    params = parse_params({"rule_aware": True, "cluster": {"method": "peers", "restarts": 2},
                           "distill": {"classifier": "lenet"},
                           "ground": {"permutation": "peers", "align_inputs": True}})
    assert [found for found, _ in params.rule_reading()] == [s.strip("'") for _, s in RULE_READING]


def test_the_rule_reading_clusterers_are_those_that_read_peers():
    assert set(RULE_READING_CLUSTERERS) == {name for name, cls in CLUSTERERS.items() if cls.reads_peers}


def test_the_headline_9x9_profile_is_rule_free_and_its_rule_aware_twin_trains_alike():
    rule_free, rule_aware = compose("cpu9"), compose("cpu9_rules")
    assert not rule_free["rule_aware"] and not parse_params(rule_free).rule_reading()
    assert rule_aware["rule_aware"] and {s for s, _ in parse_params(rule_aware).rule_reading()} == {
        "cluster.method: peers", "ground.permutation: peers", "ground.align_inputs: true"}
    for section in ("data", "distill", "satnet", "train", "reread", "proofread"):
        assert rule_free[section] == rule_aware[section], section  # the rows compare
    # the check's folds: chosen on cpu9's dev boards after cpu9_rules' records (kept as they ran)
    assert {**rule_free["evaluate"], "check_folds": 8} == rule_aware["evaluate"]
    assert rule_free["evaluate"]["check_folds"] == 16
    assert (rule_free["train"]["epochs"], rule_free["train"]["decay_epochs"]) == (10, 5)


@pytest.mark.parametrize("name", ["paper", "cpu9_paper"])
def test_the_paper_profiles_are_the_published_mechanism(name):
    """Every addition of ours off, whether the profile says so or the schema's default does."""
    params = parse_params(compose(name), name)
    assert not params.rule_aware and params.rule_reading() == []
    assert params.cluster.method == "infogan"
    # restarts, where a profile has them, are told apart without labels and without the rules
    assert params.cluster.restarts == 1 or params.cluster.restart_choice in ("agreement", "information")
    g = params.ground
    assert (g.loss, g.approxmax, g.output_softmax, g.assignment, g.permutation, g.align_inputs) == (
        "paper", "l2", True, "argmax", "loss", False)
    assert (params.train.init_from_ground, params.train.decay_epochs, params.train.classifier_lr) == (True, 0, 1e-5)
    assert params.reread.reader == "none" and not params.reread.keep_classifier
    assert (params.evaluate.check_folds, params.evaluate.starts, params.evaluate.views) == (0, 1, 1)
    assert params.distill.augment == Augment(shift=0.0, rotation=0.0, scale=0.0)  # no augmentation (ours)
    assert (params.data.board_size, params.satnet.m, params.satnet.aux) == (3, 600, 300)


def test_the_schema_choices_are_the_librarys():
    fields = {f.name: f for f in dataclasses.fields(Params)}
    choices = lambda section, key: next(f.metadata["choices"] for f in dataclasses.fields(  # noqa: E731
        fields[section].type if isinstance(fields[section].type, type) else getattr(
            sys.modules["satground.harness.params"], fields[section].type)) if f.name == key)
    assert set(choices("cluster", "method")) == set(CLUSTERERS)
    assert set(choices("ground", "approxmax")) == set(APPROXMAX)
    assert set(choices("ground", "loss")) == set(LOSSES)
    assert set(choices("ground", "assignment")) == set(ASSIGNMENTS)
    assert set(choices("ground", "permutation")) == set(PERMUTATION_SOURCES)
    assert set(Params().data.puzzles.__dataclass_fields__["generator"].metadata["choices"]) == set(sudoku.GENERATORS)
    assert set(Params().data.mnist.__dataclass_fields__["source"].metadata["choices"]) == set(mnist.SOURCES)


def test_no_stage_script_reads_a_parameter_or_default_of_its_own():
    for script in (REPO / "stages").glob("*.py"):
        text = script.read_text()
        assert "param(" not in text and "params[" not in text, script


def test_the_readers_training_settings_carry_the_width_to_a_cnn_reader_alone():
    """reread.width and label_smoothing train the cnn reader's CNNs; a lenet reader trained
    beside it (a study's candidates) takes the same rate, batch and augmentation without them."""
    cfg = Reread(width=16, label_smoothing=0.1)
    assert cfg.reader_training()["width"] == 16
    assert cfg.reader_training()["label_smoothing"] == 0.1
    cnn_only = ("width", "label_smoothing")
    assert not set(cnn_only) & set(cfg.reader_training("lenet"))
    assert {k: v for k, v in cfg.reader_training().items() if k not in cnn_only} == cfg.reader_training("lenet")
    assert Reread(reader="lenet").reader_training("cnn")["width"] == Reread.width


def test_label_smoothing_needs_the_cnn_reader():
    with pytest.raises(PipelineError, match="reread.label_smoothing"):
        parse_params({"reread": {"reader": "lenet", "label_smoothing": 0.1}})
    with pytest.raises(PipelineError, match="reread.label_smoothing"):
        parse_params({"reread": {"label_smoothing": 0.6}})
