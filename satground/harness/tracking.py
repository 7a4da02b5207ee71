"""What a stage reports, and where: the one owner of the layout of metrics/<stage>/.

    metrics/<stage>/metrics.json    the stage's headline values (dvclive's summary): the one file
                                    `dvc metrics show` and `dvc exp show` read for the stage, with
                                    short names unique across stages (docs/metrics-and-plots.md)
    metrics/<stage>/plots/metrics/  per-epoch curves (dvclive .tsv files), step = epoch from 1
    metrics/<stage>/info.json       bookkeeping: sizes, sources, parameter counts (not a metric)
    metrics/<stage>/scores.json     a model's full test scores, with and without proofreader,
                                    where a later stage reads them (the results table)
    metrics/<stage>/timing.json     seconds spent: not declared to DVC (and ignored by git), so a
                                    rerun changes no lock file and no metric. Neither DVC's run
                                    cache nor `dvc exp apply` restores it, so it names the
                                    metrics.json it was written with (`timing_is_current`)
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from .io import PipelineError, load_json, save_json

DIGITS = 4  # headline values are rounded: 0.8460, not 0.8459999..., in `dvc exp show`
CURVES = Path("plots") / "metrics"
VARIANTS = ("no_proofreader", "proofreader")
SCORES = ("board_accuracy", "blank_board_accuracy", "valid_grid_rate", "cell_accuracy",
          "visual_accuracy")


class StageReport:
    """A stage's metrics folder: per-epoch curves while it runs, the rest when it finishes.

    The folder always exists after `finish`, with an empty plots/ when the stage logged no
    curve (a training-free clusterer), so dvc.yaml can declare it for every method.
    """

    def __init__(self, directory):
        from dvclive import Live

        self.dir = Path(directory)
        self.live = Live(dir=str(self.dir), dvcyaml=None, save_dvc_exp=False, report=None)
        self.started = time.perf_counter()

    def log_epoch(self, epoch: int, values: dict, prefix: str = "") -> None:
        """One point of each curve at step = epoch (0 = before training)."""
        self.live.step = epoch
        for name, value in values.items():
            if value is not None:
                self.live.log_metric(prefix + name, float(value))

    def finish(self, metrics: dict, info: dict | None = None, **timing) -> None:
        """Write the headline `metrics` (the stage's metrics file), `info` and the timings."""
        if info is not None:
            save_json(info, self.dir / "info.json")
        # the metrics file holds the headline values only: not the curves' last points, nor a
        # 'step' (the epoch count is a parameter)
        self.live.summary = {}
        self.live.step = None
        for name, value in metrics.items():
            if value is not None:
                value = round(value, DIGITS) if isinstance(value, float) else value
                self.live.log_metric(name, value, plot=False)
        self.live.end()
        (self.dir / CURVES).mkdir(parents=True, exist_ok=True)
        save_json({"seconds": round(time.perf_counter() - self.started, 1), **timing,
                   "metrics_sha256": _sha256(self.dir / "metrics.json")}, self.dir / "timing.json")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def timing_is_current(directory) -> bool:
    """Whether metrics/<stage>/timing.json was written by the run whose metrics.json is there: a
    stage restored from the run cache, or an experiment applied, leaves an older run's timing."""
    directory = Path(directory)
    try:
        timing = load_json(directory / "timing.json", "stage timing")
        return isinstance(timing, dict) and timing.get("metrics_sha256") == _sha256(directory / "metrics.json")
    except (PipelineError, OSError):
        return False


def save_scores(scores: dict, directory) -> None:
    """A model's test scores {variant: satground.boards.metrics.board_metrics(...)}, for evaluate."""
    save_json(scores, Path(directory) / "scores.json")


def load_scores(directory) -> dict:
    """The scores save_scores wrote, checked: one-line errors name the file."""
    path = Path(directory) / "scores.json"
    scores = load_json(path, "scores")
    for variant, values in scores.items():
        if variant not in VARIANTS or not isinstance(values, dict) or not set(SCORES) <= values.keys():
            raise PipelineError(f"{path}: expected {list(VARIANTS)} with {list(SCORES)}, got "
                                f"{variant!r} (rerun its stage)")
    return scores
