"""The README's tables and docs/results.md's seeds tables are written from the kept records
(scripts/headline_table.py): they cannot drift from them, and a record that changes makes the
check fail."""
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("headline_table", REPO / "scripts" / "headline_table.py")
headline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(headline)


def edit(folder: Path, stage: str, key: str, update) -> None:
    """Change one stage's entry ("metrics", "info") in a record's metrics.json bundle."""
    path = folder / "metrics.json"
    data = json.loads(path.read_text())
    entry = data["stages"][stage]
    entry[key] = update(entry.get(key, {}))
    path.write_text(json.dumps(data))


def test_the_readme_table_is_the_records_table():
    assert headline.main(["--check"]) == 0


def test_a_changed_record_makes_the_readme_table_stale(tmp_path, monkeypatch):
    results = tmp_path / "results"
    shutil.copytree(REPO / "results" / "cpu9_rules", results / "cpu9_rules",
                    ignore=shutil.ignore_patterns("*.png", "epochs1*", "*.jsonl"))
    readme = tmp_path / "README.md"
    monkeypatch.setattr(headline, "ROOT", tmp_path)
    readme.write_text(f"intro\n{headline.BEGIN}\n{headline.END}\nrest\n")
    assert headline.main(["--readme", str(readme)]) == 0
    assert headline.main(["--check", "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("rest\n") and "| exact boards, as trained |" in text
    edit(results / "cpu9_rules", "evaluate", "metrics", lambda values: {**values, "boards": 0.0})
    assert headline.main(["--check", "--readme", str(readme)]) == 1


def test_a_metric_some_records_lack_says_how_many_seeds_it_covers(tmp_path, monkeypatch):
    """`boards_views` exists only in records run with evaluate.views > 1: a row of it names the
    seeds it covers, and a configuration whose records all lack it says "not measured"."""
    results = tmp_path / "results" / "cpu9_rules"
    shutil.copytree(REPO / "results" / "cpu9_rules", results,
                    ignore=shutil.ignore_patterns("*.png", "epochs1*", "*.jsonl"))
    monkeypatch.setattr(headline, "ROOT", tmp_path)
    row = next(line for line in headline.table().splitlines() if "read in views" in line)
    assert "| not measured |" in row
    edit(results, "evaluate", "metrics", lambda values: {**values, "boards_views": 0.5})
    n = len(list(headline.seed_folders(tmp_path / "results", "cpu9_rules")))
    row = next(line for line in headline.table().splitlines() if "read in views" in line)
    assert f"| 50.0 (1 of {n} seeds) |" in row if n > 1 else "| 50.0 (1 seed) |" in row


def test_the_results_page_holds_the_seeds_table_as_recorded(tmp_path, monkeypatch):
    seeds = tmp_path / "results" / "cpu9" / "seeds"
    seeds.mkdir(parents=True)
    (seeds / "seeds.md").write_text("| test boards, % | mean |\n|---|---|\n| exact | 87.0 |\n")
    monkeypatch.setattr(headline, "ROOT", tmp_path)
    shutil.copytree(REPO / "results" / "cpu9_rules", tmp_path / "results" / "cpu9_rules",
                    ignore=shutil.ignore_patterns("*.png", "epochs1*", "*.jsonl"))
    readme, page = tmp_path / "README.md", tmp_path / "results.md"
    readme.write_text(f"{headline.BEGIN}\n{headline.END}\n")
    begin = ("<!-- cpu9 seeds table: written by scripts/headline_table.py from "
             "results/cpu9/seeds/seeds.md; do not edit -->")
    page.write_text(f"text\n{begin}\nold\n<!-- end of the cpu9 seeds table -->\nmore\n")
    args = ["--readme", str(readme), "--results-page", str(page)]
    assert headline.main(args) == 0
    assert page.read_text() == f"text\n{begin}\n{(seeds / 'seeds.md').read_text()}<!-- end of the cpu9 seeds table -->\nmore\n"
    assert headline.main(["--check"] + args) == 0
    (seeds / "seeds.md").write_text("| test boards, % | mean |\n|---|---|\n| exact | 86.0 |\n")
    assert headline.main(["--check"] + args) == 1


def test_the_readme_is_a_front_door():
    """At most 150 lines, and exactly two set-up commands: install + run, install + test."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    quick = text.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in quick.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2 and commands[0].endswith("dvc repro") and "pytest" in commands[1]


def test_intervals_show_once_every_seed_has_one(tmp_path, monkeypatch):
    """A row gets the mean's 95 % interval only when every seed's record has evaluate's
    bootstrap; the seeds' standard errors combine as for independent test sets."""
    results = tmp_path / "results" / "cpu9_rules"
    shutil.copytree(REPO / "results" / "cpu9_rules", results,
                    ignore=shutil.ignore_patterns("*.png", "epochs1*", "*.jsonl"))
    monkeypatch.setattr(headline, "ROOT", tmp_path)
    folders = headline.seed_folders(tmp_path / "results", "cpu9_rules")

    def exact_row():
        return next(line for line in headline.table().splitlines() if line.startswith("| exact boards, as trained |"))

    assert "[" not in exact_row()
    for folder in folders:
        value = headline.read_record(folder).metrics["evaluate"]["boards"]
        interval = {"low": value - 0.05, "high": value + 0.05, "se": 0.02, "effective_boards": 600}
        edit(folder, "evaluate", "info", lambda info: {**info, "intervals": {"boards": interval}})
        if folder == folders[0] and len(folders) > 1:
            assert "[" not in exact_row()  # not every seed has one yet
    mean = sum(headline.read_record(f).metrics["evaluate"]["boards"] for f in folders) / len(folders)
    half = 1.96 * 0.02 / len(folders) ** 0.5
    assert f"[{100 * (mean - half):.1f}, {100 * (mean + half):.1f}]" in exact_row()
    effective = next(line for line in headline.table().splitlines() if "effective number" in line)
    assert "| 600 |" in effective


def test_results_are_records_a_clone_can_carry():
    """results/ holds under 1,000 files and under 12 MB (a record is its summary, params, run.json,
    one metrics.json, its dev scores and the figures quoted: a further seed 3 files and about
    40 kB, so the twenty-seed records fit, and a model or a run's metrics/ folder does not), and
    every results/...png the README or docs/ quote exists."""
    listed = subprocess.run(["git", "ls-files", "results"], cwd=REPO, capture_output=True, text=True)
    if listed.returncode == 0 and (REPO / ".git").exists():
        files = [line for line in listed.stdout.splitlines() if line]
    else:  # not a git checkout: the files on disk
        files = [p for p in (REPO / "results").rglob("*") if p.is_file()]
    assert len(files) < 1000, f"results/ holds {len(files)} files"
    size = sum((REPO / f).stat().st_size for f in files)
    assert size < 12e6, f"results/ holds {size / 1e6:.1f} MB"
    quoted = {match for doc in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]
              for match in re.findall(r"results/[A-Za-z0-9_./-]*\.png", doc.read_text())}
    assert quoted, "no figure quoted: the pattern is wrong"
    assert not [path for path in sorted(quoted) if not (REPO / path).is_file()]


def test_a_figure_under_100_never_reads_100():
    """99.97 % of the givens read right shows two decimals; a row that one decimal shows truly
    keeps one, and 100 itself stays 100.0."""
    assert headline.spread([0.9997, 0.9996]) == "99.97 +- 0.01"
    assert headline.spread([0.985, 0.989]) == "98.7 +- 0.3"
    assert headline.spread([1.0, 1.0]) == "100.0 +- 0.0"
