"""Device-only stand-in for dvclive.Live (dvclive imports dvc, which the GPU machine lacks):
the same files StageReport reads back, metrics.json and plots/metrics/<name>.tsv."""
import json
from pathlib import Path


class Live:
    def __init__(self, dir, **_):
        self.dir, self.step, self.summary = Path(dir), None, {}
        self.dir.mkdir(parents=True, exist_ok=True)

    def log_metric(self, name, value, plot=True):
        self.summary[name] = value
        if plot and self.step is not None:
            path = self.dir / "plots" / "metrics" / f"{name}.tsv"
            path.parent.mkdir(parents=True, exist_ok=True)
            new = not path.exists()
            with path.open("a") as f:
                if new:
                    f.write(f"step\t{name.split('/')[-1]}\n")
                f.write(f"{self.step}\t{value}\n")

    def end(self):
        (self.dir / "metrics.json").write_text(json.dumps(self.summary, indent=4))
