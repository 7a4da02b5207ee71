"""Runs dvc.yaml's stages in dependency order without dvc (absent on the GPU machine), timing each."""
import json, os, subprocess, sys, time
from pathlib import Path
import yaml

stages = yaml.safe_load(Path("dvc.yaml").read_text())["stages"]
outs = {name: [str(o if isinstance(o, str) else next(iter(o))) for o in s.get("outs", [])] for name, s in stages.items()}
def needs(name):
    return {other for other in stages if other != name and any(
        d == o or d.startswith(o.rstrip("/") + "/") or o.startswith(d.rstrip("/") + "/")
        for d in stages[name].get("deps", []) for o in outs[other])}
order, left = [], dict(stages)
while left:
    ready = [n for n in left if needs(n) <= set(order)]
    assert ready, left
    order += ready
    for n in ready: left.pop(n)
order = order[order.index(os.environ.get("START_AT", order[0])):]
out = Path(os.environ["OUT"]); seconds = {}
start = time.perf_counter()
for name in order:
    t = time.perf_counter()
    print(f"=== {name}", flush=True)
    cmd = stages[name]["cmd"]
    cmd = sys.executable + cmd[len("python"):] if cmd.startswith("python ") else cmd
    rc = subprocess.run(cmd, shell=True).returncode
    seconds[name] = round(time.perf_counter() - t, 1)
    (out / "stage_seconds.json").write_text(json.dumps({"order": order, "seconds": seconds, "total": round(time.perf_counter() - start, 1), "failed": name if rc else None}, indent=1))
    if rc:
        sys.exit(f"stage {name} failed: exit {rc}")
print(json.dumps(seconds), "total", round(time.perf_counter() - start, 1))
