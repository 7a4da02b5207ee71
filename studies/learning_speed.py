"""How fast SATNet learns 9x9 non-visual Sudoku, under controlled changes (docs/studies/learning-speed.md).

    python studies/learning_speed.py run --generator hidden_singles --epochs 20 \
        --out results/learning_speed/hidden_singles.json
    python studies/learning_speed.py stats                     # puzzle statistics per generator
    python studies/learning_speed.py plot results/learning_speed/*.json --out plots/learning_speed.png

`run` trains the original SATNet (m, aux, Adam, batch as given; default the paper's 600 / 300 /
2e-3 / 40) on generated puzzles, the boards in a fixed order as the original's loader, and scores
500 held-out puzzles after each epoch: accuracy over blank cells and boards with every blank
right. It writes the curve after every epoch, and with --resume also the model and optimizer state
(beside --out, as .pt), so a run cut short can go on where it stopped (`--resume` again). The
held-out puzzles are generated here (--test of them, after the training ones), not the pipeline's
test split; the curve's keys keep their names (test_blank_cell_accuracy, test_board_accuracy) so
the saved runs still plot.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from satground.boards import sudoku
from satground.boards.data import Boards
from satground.solver.models import SymbolicSolver
from satground.solver.training import bce_loss, evaluate_outputs, train_epoch


def symbolic_boards(puzzles: np.ndarray, solutions: np.ndarray, board_size: int) -> Boards:
    """Boards for a non-visual model: the given digits are the input, no image is ever read."""
    cell_image = np.where(puzzles > 0, 0, -1).astype(np.int64)
    return Boards(board_size, torch.zeros(1, 28, 28, dtype=torch.uint8), torch.from_numpy(cell_image),
                  torch.from_numpy(puzzles > 0), torch.from_numpy(solutions.astype(np.uint8)))


def run(args) -> None:
    n_train, n_held_out = args.train, args.test
    puzzles, solutions = sudoku.generate_puzzles(n_train + n_held_out, 3, args.data_seed, generator=args.generator)
    train = symbolic_boards(puzzles[:n_train], solutions[:n_train], 3)
    held_out = symbolic_boards(puzzles[n_train:], solutions[n_train:], 3)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = torch.device(args.device)
    model = SymbolicSolver(3, args.m, args.aux, zero_input_outputs=False).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    shuffle = torch.Generator().manual_seed(args.seed) if args.shuffle else None
    config = {k: v for k, v in vars(args).items() if k not in ("command", "func", "out", "resume")}
    config["givens_mean"] = float((puzzles[:n_train] != 0).sum(axis=1).mean())
    rows = []
    state = args.out.with_suffix(".pt")
    if args.resume and state.exists():
        saved = torch.load(state, map_location=device, weights_only=True)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        if shuffle is not None:
            shuffle.set_state(saved["shuffle"])
        rows = json.loads(args.out.read_text())["curve"]
        print(f"resumed after epoch {len(rows)}", flush=True)
    for epoch in range(len(rows) + 1, args.epochs + 1):
        start = time.perf_counter()
        loss = train_epoch(model, train, optimizer, bce_loss(on_inputs=args.loss == "all"),
                           args.batch_size, device, shuffle, desc=f"epoch {epoch}")
        scores = evaluate_outputs(model, held_out, 100, device)
        rows.append({"epoch": epoch, "boards_seen": epoch * n_train, "train_loss": loss,
                     "test_blank_cell_accuracy": scores["blank_cells"],
                     "test_board_accuracy": scores["blank_boards"],
                     "seconds": time.perf_counter() - start})
        print(json.dumps(rows[-1]), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"config": config, "curve": rows}, indent=1) + "\n")
        if args.resume:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "shuffle": shuffle.get_state() if shuffle is not None else None}, state)
        if scores["blank_boards"] >= args.stop_at:
            break


def propagation(puzzle: np.ndarray, rules: str) -> int:
    """Rounds of naked and/or hidden singles that fill the 9x9 puzzle; -1 if they get stuck."""
    grid = puzzle.reshape(9, 9).astype(np.int64).copy()
    cells = [(r, q) for r in range(9) for q in range(9)]
    groups = ([[(r, q) for q in range(9)] for r in range(9)] + [[(r, q) for r in range(9)] for q in range(9)]
              + [[(3 * (b // 3) + i // 3, 3 * (b % 3) + i % 3) for i in range(9)] for b in range(9)])

    def candidates(r, q):
        taken = set(grid[r]) | set(grid[:, q]) | set(grid[r // 3 * 3:r // 3 * 3 + 3, q // 3 * 3:q // 3 * 3 + 3].ravel())
        return [d for d in range(1, 10) if d not in taken]

    rounds = 0
    while (grid == 0).any():
        found = {}
        if "naked" in rules:
            for r, q in cells:
                if grid[r, q] == 0 and len(c := candidates(r, q)) == 1:
                    found[(r, q)] = c[0]
        if "hidden" in rules:
            for group in groups:
                for d in range(1, 10):
                    spots = [(r, q) for r, q in group if grid[r, q] == 0 and d in candidates(r, q)]
                    if len(spots) == 1 and not any(grid[r, q] == d for r, q in group):
                        found[spots[0]] = d
        if not found:
            return -1
        for cell, digit in found.items():
            grid[cell] = digit
        rounds += 1
    return rounds


def stats(args) -> None:
    for generator in sudoku.GENERATORS:
        puzzles, _ = sudoku.generate_puzzles(args.n, 3, args.data_seed, generator=generator)
        givens = (puzzles != 0).sum(axis=1)
        line = {"generator": generator, "puzzles": args.n, "givens_mean": round(float(givens.mean()), 2),
                "givens_std": round(float(givens.std()), 2)}
        for rules in ("naked", "hidden", "naked+hidden"):
            rounds = np.array([propagation(p, rules) for p in puzzles])
            line[f"solved_by_{rules}_singles"] = round(float((rounds >= 0).mean()), 3)
            line[f"mean_rounds_{rules}"] = round(float(rounds[rounds >= 0].mean()), 2) if (rounds >= 0).any() else None
        print(json.dumps(line))


def plot(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for path in args.curves:
        saved = json.loads(Path(path).read_text())
        curve = saved["curve"]
        label = saved.get("label") or Path(path).stem
        epochs = [row["epoch"] for row in curve]
        axes[0].plot(epochs, [100 * row["test_blank_cell_accuracy"] for row in curve], "o-", ms=3, label=label)
        axes[1].plot(epochs, [100 * row["test_board_accuracy"] for row in curve], "o-", ms=3, label=label)
    for ax, what in zip(axes, ("blank cells right", "boards solved (every blank right)")):
        ax.set_xlabel("epoch (9,000 boards each)")
        ax.set_ylabel(f"held-out {what}, %")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
    axes[1].axhline(90, color="grey", lw=0.8, ls="--")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("9x9 non-visual SATNet (m=600, aux=300, Adam 2e-3, batch 40): learning speed by puzzle generator",
                 fontsize=10)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"wrote {args.out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="train and score one configuration")
    p.add_argument("--generator", choices=sudoku.GENERATORS, default="hidden_singles")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--train", type=int, default=9000)
    p.add_argument("--test", type=int, default=500, help="held-out puzzles, generated after the training ones")
    p.add_argument("--m", type=int, default=600)
    p.add_argument("--aux", type=int, default=300)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--batch-size", type=int, default=40)
    p.add_argument("--loss", choices=("outputs", "all"), default="outputs", help="BCE on blank cells or all")
    p.add_argument("--shuffle", action="store_true", help="shuffle the boards each epoch (default: fixed order)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--stop-at", type=float, default=1.01, help="stop once held-out boards reach this share")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (the layer's Triton backend)")
    p.add_argument("--resume", action="store_true", help="save state each epoch; go on from a saved one")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=run)
    p = sub.add_parser("stats", help="givens and propagation depth of each generator's puzzles")
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--data-seed", type=int, default=0)
    p.set_defaults(func=stats)
    p = sub.add_parser("plot", help="draw saved curves")
    p.add_argument("curves", nargs="+")
    p.add_argument("--out", type=Path, default=Path("plots/learning_speed.png"))
    p.set_defaults(func=plot)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
