"""How fast SATNet learns 9x9 Sudoku's rules from the blank cells' labels alone, before it sees
an image (`train.rules_epochs`; docs/studies/rules-first.md).

    python studies/rules_first.py --prepared RUN/data/prepared --epochs 3 --shown 0.8 \
        --out results/rules_first/shown08.json

A fresh SATNet of the default's size (m 600, aux 300, k 32 or `--k`, lr 2e-3, batch 40) learns from the
training boards' ungrounded view exactly as the train stage's rules epochs do
(satground.solver.training.learn_rules): each board shows a random `--shown` share of its
labelled blank cells, SATNet infers the others; the givens are free cells, neither image nor
label. After each epoch it scores the dev boards the same way; at the end, three label-free
checks: hidden cells right on dev views showing 0.5 and 0.8 of the known cells, and the share of
dev grids SATNet completes validly when it sees every known cell (the re-read's task). No
given's label of any split is read. Writes the curve and the checks as JSON.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepared", type=Path, required=True, help="a run's data/prepared folder")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--shown", type=float, default=0.8)
    parser.add_argument("--k", type=int, default=32, help="satnet.k, the SDP rank")
    parser.add_argument("--precision", default="auto", help="satnet.precision")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init", type=Path, help="start from this SATNet's weights (a --save file; Adam and the epoch count start afresh)")
    parser.add_argument("--save", type=Path, help="write the trained SATNet's weights here")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import torch

    from satground.boards.data import load_boards
    from satground.satnet import check_setup, kernel_description
    from satground.solver.models import SymbolicSolver
    from satground.solver.training import RulesLearner, evaluate_outputs, known_cells, learn_rules

    device = torch.device("cpu")
    check_setup(device, args.precision)
    train = load_boards(args.prepared, "train")
    dev = load_boards(args.prepared, "dev", like=train)
    torch.manual_seed(args.seed)
    solver = SymbolicSolver(train.board_size, m=600, aux=300, max_iter=40, eps=1e-4, k=args.k)
    if args.init:
        solver.load_state_dict(torch.load(args.init))
    curve = []

    class Report:  # the rows learn_rules logs, kept with their seconds
        start = time.perf_counter()

        def log_epoch(self, epoch, row, prefix):
            curve.append({"epoch": epoch, **row, "seconds": round(time.perf_counter() - self.start, 1)})
            print(json.dumps(curve[-1]), flush=True)

    learn_rules(solver, train, dev, args.epochs, args.shown, 2e-3, 40, device,
                torch.Generator().manual_seed(args.seed), Report())
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        torch.save(solver.state_dict(), args.save)
    solver.satnet.solve_sweeps = 40
    learner = RulesLearner(solver, args.shown, torch.Generator())
    checks = {}
    for shown in (0.5, 0.8):
        view = known_cells(dev, shown, torch.Generator().manual_seed(args.seed + 1))
        checks[f"dev_hidden_cells_shown_{shown}"] = evaluate_outputs(learner, view, 100, device)["blank_cells"]
    checks["dev_valid_grids_all_known_shown"] = evaluate_outputs(learner, known_cells(dev), 100,
                                                                 device)["valid_grids"]
    out = {"config": {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                      "kernel": kernel_description(device), "threads": torch.get_num_threads()},
           "curve": curve, "checks": checks}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(checks))


if __name__ == "__main__":
    main()
