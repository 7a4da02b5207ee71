"""studies/seed_groups.py: the exact permutation p and the Welch interval against their
definitions (scipy's Welch test as the reference)."""
import itertools

import numpy as np
import pytest
from scipy import stats

from script_import import script

groups = script("studies", "seed_groups")


def test_the_permutation_p_counts_every_deal():
    apart = groups.permutation_p(np.array([9.0, 10.0]), np.array([1.0, 2.0, 3.0]))
    assert apart == pytest.approx(1 / 10)  # of the C(5, 2) deals only the observed one reaches it
    mirrored = groups.permutation_p(np.array([9.0, 10.0]), np.array([1.0, 2.0]))
    assert mirrored == pytest.approx(2 / 6)  # equal groups: the swapped deal reaches it too
    assert groups.permutation_p(np.array([1.0, 1.0]), np.array([1.0, 1.0, 1.0])) == 1.0
    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, 5), rng.normal(0, 1, 10)
    pooled = np.r_[a, b]
    deals = [abs(np.delete(pooled, list(p)).mean() - pooled[list(p)].mean())
             for p in itertools.combinations(range(15), 5)]
    assert groups.permutation_p(a, b) == pytest.approx(np.mean(np.array(deals) >= abs(b.mean() - a.mean()) - 1e-12))


def test_the_welch_interval_is_scipys():
    rng = np.random.default_rng(1)
    a, b = rng.normal(67, 5, 5), rng.normal(60, 8, 10)
    low, high = groups.welch(a, b)
    ref = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert (low, high) == pytest.approx((ref.low, ref.high))


def test_seed_ranges_and_a_missing_record_are_one_line_errors(tmp_path):
    assert groups.seed_range("10-12") == [10, 11, 12] and groups.seed_range("7") == [7]
    with pytest.raises(SystemExit, match="not found"):
        groups.main(["--records", str(tmp_path), "--choosers", "0-1"])
