"""Min/max decimation per pixel bucket (molrec_raw.record.runplot.decimate), property-tested."""
from __future__ import annotations

import math
from typing import Dict, List

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from molrec_raw.errors import InvalidValueError
from molrec_raw.record.runplot.decimate import decimate

values = st.one_of(st.floats(min_value=-1e6, max_value=1e6), st.just(math.nan), st.just(math.inf),
                   st.integers(-3, 3).map(float))  # repeated values: ties for the extremes


@st.composite
def series(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    n = draw(st.integers(0, 400))
    steps = np.sort(np.array(draw(st.lists(st.integers(-50, 5000), min_size=n, max_size=n)), dtype=np.int64))
    y = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
    buckets = draw(st.integers(1, 40))
    return steps, y, buckets


def _bucket(x: float, lo: float, hi: float, buckets: int) -> int:
    """The pixel column of ``x`` (the definition: equal columns over [lo, hi])."""
    if hi <= lo:
        return 0
    return min(max(int((x - lo) * (buckets / (hi - lo))), 0), buckets - 1)


# The default run's examples (issue 36: 200 before, to fit the suite's time); the campaign
# (-m campaign) draws 200, as many as the default run did.
@settings(max_examples=60, deadline=None)
@given(series())
def test_every_extreme_of_every_bucket_is_kept(case) -> None:  # type: ignore[no-untyped-def]
    _every_extreme_of_every_bucket_is_kept(case)


@pytest.mark.campaign
@settings(max_examples=200, deadline=None)
@given(series())
def test_every_extreme_of_every_bucket_is_kept_campaign(case) -> None:  # type: ignore[no-untyped-def]
    _every_extreme_of_every_bucket_is_kept(case)


def _every_extreme_of_every_bucket_is_kept(case) -> None:  # type: ignore[no-untyped-def]
    steps, y, buckets = case
    kept = decimate(steps, y, buckets)
    n = y.shape[0]
    assert kept.dtype == np.int64 and np.all(np.diff(kept) > 0) and (kept.size == 0 or 0 <= kept[0] <= kept[-1] < n)
    if n <= 4 * buckets:
        assert kept.tolist() == list(range(n))  # small series are drawn whole
        return
    lo, hi = float(steps[0]), float(steps[-1])
    finite = np.isfinite(y)
    per_bucket: Dict[int, List[int]] = {}
    for i in range(n):
        if finite[i]:
            per_bucket.setdefault(_bucket(float(steps[i]), lo, hi, buckets), []).append(i)
    kept_set = set(kept.tolist())
    for column, members in per_bucket.items():
        inside = [i for i in members if i in kept_set]
        values_kept = [y[i] for i in inside]
        assert min(y[members]) in values_kept and max(y[members]) in values_kept, f"bucket {column} lost an extreme"
        assert members[0] in kept_set and members[-1] in kept_set  # the joins to both neighbours
        assert len(inside) <= 4
    # never joined across a gap: between two consecutive kept finite points lies no dropped gap
    kept_finite = [i for i in kept.tolist() if finite[i]]
    for a, b in zip(kept_finite, kept_finite[1:]):
        if not finite[a + 1:b].all():
            assert any(not finite[i] for i in kept.tolist() if a < i < b), f"points {a} and {b} joined across a gap"
    assert sum(1 for i in kept.tolist() if finite[i]) <= 4 * buckets


def test_a_single_spike_survives_a_million_points() -> None:
    y = np.zeros(1_000_000)
    y[123_457] = 9.0
    y[800_000] = -9.0
    kept = decimate(np.arange(y.shape[0]), y, 500)
    assert 123_457 in kept and 800_000 in kept and kept.shape[0] <= 2000


def test_shared_bucket_edges_and_degenerate_ranges() -> None:
    """lo/hi fix the columns for panels sharing an axis; one x value for all is one column;
    a series of nothing but gaps keeps one gap marker."""
    x = np.arange(100)
    y = np.arange(100.0)
    assert decimate(x, y, 2, lo=0, hi=1000).tolist() == [0, 99]  # every point in the first column
    assert decimate(np.zeros(50), np.arange(50.0), 2).tolist() == [0, 49]
    assert decimate(x, np.full(100, math.nan), 3).tolist() == [0]
    with pytest.raises(InvalidValueError):
        decimate(x, y, 0)
