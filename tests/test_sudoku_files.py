"""The Sudoku file readers (satground/boards/files.py): round trips and one-line errors for bad files."""
import numpy as np
import pytest
import torch

from satground.boards import sudoku, files as sudoku_files
from satground.harness.io import PipelineError


@pytest.fixture(scope="module")
def generated():
    return {3: sudoku.generate_puzzles(60, 3, seed=11)}


def one_line(exc_info, *names):
    message = str(exc_info.value)
    assert "\n" not in message
    for name in names:
        assert str(name) in message, message
    return message


def write_csv(path, rows):
    path.write_text("quizzes,solutions\n" + "".join(f"{p},{s}\n" for p, s in rows))
    return path


def as_text(board, blank="0"):
    return "".join(blank if d == 0 else str(d) for d in board)


def test_read_csv_round_trip(tmp_path, generated):
    puzzles, solutions = generated[3]
    rows = [(as_text(p, "." if i % 2 else "0"), as_text(s)) for i, (p, s) in enumerate(zip(puzzles[:5], solutions[:5]))]
    got_p, got_s, lines = sudoku_files.read_csv(write_csv(tmp_path / "ok.csv", rows), 3)
    np.testing.assert_array_equal(got_p, puzzles[:5])
    np.testing.assert_array_equal(got_s, solutions[:5])
    assert lines.tolist() == [2, 3, 4, 5, 6]  # after the header line
    assert len(sudoku_files.read_csv(tmp_path / "ok.csv", 3, limit=2)[0]) == 2


def test_read_csv_rejects_bad_rows(tmp_path, generated):
    puzzles, solutions = generated[3]
    p, s = as_text(puzzles[0]), as_text(solutions[0])
    cell = int(np.flatnonzero(puzzles[0])[0])
    wrong_given = list(p)
    wrong_given[cell] = str(solutions[0][cell] % 9 + 1)
    swapped = s[1] + s[0] + s[2:]
    cases = {
        "short": ([(p[:-1], s)], "80 characters"),
        "letters": ([(p[:-1] + "x", s)], "'x'"),
        "blank solution": ([(p, s[:-1] + "0")], "'0'"),
        "fields": ([(p, s + ",1")], "expected 2 fields"),
        "invalid solution": ([("0" * 81, swapped)], "line 2: the solution is not a valid Sudoku grid"),
        "inconsistent": ([(p, s), ("".join(wrong_given), s)], "line 3: given"),
        "no givens": ([(p, s), ("0" * 81, s)], "line 3: the puzzle has no given cell"),
        "no blanks": ([(s, s)], "line 2: the puzzle has no blank cell"),
        "several solutions": ([(p, s), (s[:40] + "0" * 41, s)], "line 3: the puzzle has more than one solution"),
    }
    for name, (rows, problem) in cases.items():
        path = write_csv(tmp_path / f"{name.replace(' ', '_')}.csv", rows)
        with pytest.raises(PipelineError) as exc:
            sudoku_files.read_csv(path, 3)
        one_line(exc, path, problem)
    with pytest.raises(PipelineError) as exc:
        sudoku_files.read_csv(tmp_path / "missing.csv", 3)
    one_line(exc, "missing.csv", "not found")


def write_published(folder, puzzles, solutions, float_scale=1.0):
    """The published layout (see sudoku_files.read_published) for the given boards."""
    folder.mkdir(exist_ok=True)
    eye = torch.eye(10)[:, 1:]  # digit 0 -> all-zero one-hot
    torch.save(eye[torch.from_numpy(puzzles).long()].reshape(-1, 9, 9, 9), folder / "features.pt")
    torch.save(eye[torch.from_numpy(solutions).long()].reshape(-1, 9, 9, 9), folder / "labels.pt")
    g = torch.Generator().manual_seed(0)
    images = torch.rand(len(puzzles), 9, 9, 28, 28, generator=g) * float_scale
    torch.save(images, folder / "features_img.pt")
    torch.save(torch.randperm(729, generator=g), folder / "perm.pt")
    return images


def test_read_published_round_trip(tmp_path, generated):
    puzzles, solutions = generated[3]
    images = write_published(tmp_path / "pub", puzzles[:6], solutions[:6])
    got_p, got_s, given, positions = sudoku_files.read_published(tmp_path / "pub", 3, n_first=3, n_last=2)
    keep = [0, 1, 2, 4, 5]
    np.testing.assert_array_equal(got_p, puzzles[keep])
    np.testing.assert_array_equal(got_s, solutions[keep])
    assert given.dtype == np.uint8 and given.shape == (int((puzzles[keep] != 0).sum()), 28, 28)
    assert given.min() == 0 and given.max() == 255  # rescaled to the full range
    b, c = positions[7]
    assert got_p[b, c] != 0
    expected = images.reshape(6, 81, 28, 28)[keep[b], c].numpy()
    # the scale comes from all kept given cells: the same picture up to a positive affine map
    assert np.corrcoef(given[7].ravel(), expected.ravel())[0, 1] > 0.999


def test_read_published_rejects_bad_files(tmp_path, generated):
    puzzles, solutions = generated[3]
    folder = tmp_path / "pub"
    write_published(folder, puzzles[:4], solutions[:4])
    torch.save(torch.zeros(4, 81, 9), folder / "features.pt")
    with pytest.raises(PipelineError) as exc:
        sudoku_files.read_published(folder, 3)
    one_line(exc, folder / "features.pt", "(N, 9, 9, 9)")

    write_published(folder, puzzles[:4], solutions[:4])
    torch.save(torch.zeros(4, 9, 9, 27, 27), folder / "features_img.pt")
    with pytest.raises(PipelineError) as exc:
        sudoku_files.read_published(folder, 3)
    one_line(exc, folder / "features_img.pt", "expected shape")

    write_published(folder, puzzles[:4], solutions[:4])
    torch.save(torch.arange(728), folder / "perm.pt")
    with pytest.raises(PipelineError) as exc:
        sudoku_files.read_published(folder, 3)
    one_line(exc, folder / "perm.pt", "permutation")

    bad = solutions[:4].copy()
    bad[1, [0, 1]] = bad[1, [1, 0]]
    write_published(folder, np.zeros_like(puzzles[:4]), bad)
    with pytest.raises(PipelineError) as exc:
        sudoku_files.read_published(folder, 3)
    one_line(exc, folder, "board 1", "not a valid Sudoku grid")

    (folder / "labels.pt").write_bytes(b"not a tensor")
    with pytest.raises(PipelineError) as exc:
        sudoku_files.read_published(folder, 3)
    one_line(exc, folder / "labels.pt", "cannot read")

    with pytest.raises(PipelineError) as exc:
        sudoku_files.read_published(tmp_path / "nowhere", 3)
    one_line(exc, "nowhere", "not found")
