"""Declared precision (frame-and-types §8; checklist 20, 27, 34, 35, 45)."""
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from molrec_raw.errors import SpecViolationError
from molrec_raw.record.precision import (
    PRECISION_MAX,
    PRECISION_MIN,
    check_precision,
    quantum,
    round_to_precision,
)

R20, R34, R35 = (f"frame-and-types#14.{n}" for n in (20, 34, 35))

BAD_P = [0.0, -0.0, -0.001, math.nan, math.inf, -math.inf, True, False, None, "0.001",
         [0.001], 2.0**-1001, math.nextafter(PRECISION_MIN, 0), math.nextafter(PRECISION_MAX, math.inf),
         2**1001, 10**400, np.float64(0), 5e-324]


def bits(a):
    return np.asarray(a, dtype=np.float64).view(np.uint64)


def rules(p, dtype="f64", write=False):
    return [v.rule for v in check_precision(p, dtype, "/frame/atoms/x", write=write)]


def test_frame_and_types_14_20_valid_declarations_pass():
    for p in (0.001, 0.5, 1, 3, PRECISION_MIN, PRECISION_MAX, 2**1000, np.float64(0.1), np.float32(0.25)):
        for dtype in ("f64", "float64", np.float64, np.dtype("<f8"), np.dtype(">f8")):
            assert rules(p, dtype) == [] and rules(p, dtype, True) == []


@pytest.mark.parametrize("p", BAD_P, ids=repr)
def test_frame_and_types_14_20_malformed_precision_refused_on_read(p):
    assert rules(p) == [R20]


@pytest.mark.parametrize("p", BAD_P, ids=repr)
def test_frame_and_types_14_35_invalid_precision_refused_on_write(p):
    assert rules(p, write=True) == [R35]


@pytest.mark.parametrize("dtype", ["i64", "int64", "float32", "f32", "u64", "c128", "complex128",
                                   "bool", "string", np.int64, np.float16, None, "nonsense"])
def test_frame_and_types_14_34_precision_on_non_f64_column_refused(dtype):
    assert rules(0.001, dtype, write=True) == [R34]
    assert rules(0.001, dtype) == [R20]
    assert rules(0.0, dtype, write=True) == [R35, R34]


def test_frame_and_types_14_45_quantum():
    assert quantum(0.001) == 2.0**-10
    assert quantum(0.5) == 0.5
    assert quantum(1) == 1.0
    assert quantum(0.75) == 0.5
    assert quantum(PRECISION_MIN) == PRECISION_MIN and quantum(PRECISION_MAX) == PRECISION_MAX
    assert quantum(math.nextafter(1.0, 0)) == 0.5
    for p in (0.0, -1.0, math.nan, math.inf, 2.0**-1001, True):
        with pytest.raises(SpecViolationError) as info:
            quantum(p)
        assert info.value.rule == R35


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=PRECISION_MIN, max_value=PRECISION_MAX))
def test_frame_and_types_14_45_quantum_is_p_with_mantissa_cleared(p):
    cleared = struct.unpack("<d", struct.pack("<Q", struct.unpack("<Q", struct.pack("<d", p))[0]
                                              & 0xFFF0000000000000))[0]
    q = quantum(p)
    assert q == cleared and q <= p < 2 * q


def test_frame_and_types_14_45_spec_example():
    assert round_to_precision(np.array([0.7572]), 0.001)[0] == 0.7568359375 == 775 / 1024


def test_frame_and_types_14_45_precision_edge_values():
    q = 2.0**-10
    x = np.array([2.5 * q, 3.5 * q, -2.5 * q, 0.5 * q, -0.5 * q, -0.25 * q, -0.0, 0.0, 1.5 * q, -1.5 * q])
    out = round_to_precision(x, 0.001)
    np.testing.assert_array_equal(out, [2 * q, 4 * q, -2 * q, 0.0, -0.0, -0.0, -0.0, 0.0, 2 * q, -2 * q])
    assert list(np.signbit(out[3:8])) == [False, True, True, True, False]
    tiny = np.array([-5e-324, 5e-324, -PRECISION_MIN])
    assert list(np.signbit(round_to_precision(tiny, 0.001))) == [True, False, True]
    assert not round_to_precision(tiny, 0.001).any()


def test_frame_and_types_14_45_nan_bits_infinities_and_large_values_untouched():
    q = 2.0**-10
    nans = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000123,
                     0x7FF0000000000001, 0xFFF4000000ABCDEF], dtype=np.uint64).view(np.float64)
    big = np.array([2.0**52 * q, -(2.0**52) * q, 2.0**52 * q + 1.0, 1e300, -1e300,
                    np.nextafter(2.0**52 * q, np.inf)])
    x = np.concatenate([nans, [np.inf, -np.inf], big])
    out = round_to_precision(x, 0.001)
    assert np.array_equal(bits(out), bits(x))
    # just below 2^52·q: already a multiple of q/2; ties to even
    below = np.array([2.0**52 * q - q / 2, 2.0**51 * q + q / 2])
    np.testing.assert_array_equal(round_to_precision(below, 0.001), [2.0**52 * q, 2.0**51 * q])


def test_frame_and_types_14_45_input_not_modified_and_new_array():
    x = np.array([0.7572, -0.3, np.nan, 1e-9])
    keep = x.copy()
    out = round_to_precision(x, 0.001)
    assert out is not x and not np.shares_memory(out, x)
    assert np.array_equal(bits(x), bits(keep))
    assert out.dtype == np.float64 and out.shape == x.shape
    ro = np.array([[0.7572, 1.0]])
    ro.flags.writeable = False
    assert round_to_precision(ro, 0.001).shape == (1, 2)
    be = np.array([0.7572], dtype=">f8")
    assert round_to_precision(be, 0.001)[0] == 0.7568359375
    assert round_to_precision(np.array(0.7572), 0.001) == 0.7568359375


def test_frame_and_types_14_34_rounding_needs_f64_values():
    for arr in (np.array([1, 2]), np.array([0.5], dtype=np.float32), np.array([1j])):
        with pytest.raises(SpecViolationError) as info:
            round_to_precision(arr, 0.001)
        assert info.value.rule == R34


def test_frame_and_types_14_45_extreme_precisions():
    x = np.array([1e300, -3.0, 1e-300, -1e-300])
    out = round_to_precision(x, PRECISION_MAX)
    np.testing.assert_array_equal(out, [0.0, -0.0, 0.0, -0.0])
    assert list(np.signbit(out)) == [False, True, False, True]
    y = np.array([5e-324, 2.0**-1001, 3 * 2.0**-1001, 1.0])
    np.testing.assert_array_equal(round_to_precision(y, PRECISION_MIN), [0.0, 0.0, 2.0**-999, 1.0])  # 1.5q → 2q


def test_frame_and_types_14_45_overflowing_product_keeps_value():
    top = np.finfo(np.float64).max          # (2^53 − 1)·2^971
    x = np.array([top, -top, 2.0**1023, np.nextafter(top, 0)])
    out = round_to_precision(x, 2.0**972)   # top/q = 2^52 − 0.5: ties to 2^52, 2^52·q overflows
    assert np.array_equal(bits(out[:3]), bits(x[:3])) and np.all(np.isfinite(out))
    out = round_to_precision(x, 2.0**973)   # top/q = 2^51 − 0.25 rounds to 2^51; 2^51·q overflows
    assert np.array_equal(bits(out[:3]), bits(x[:3])) and np.all(np.isfinite(out))
    assert np.array_equal(bits(round_to_precision(out, 2.0**973)), bits(out))


finite_p = st.floats(min_value=PRECISION_MIN, max_value=PRECISION_MAX)
f64_arrays = hnp.arrays(np.float64, hnp.array_shapes(max_dims=2, max_side=8),
                        elements=st.floats(allow_nan=True, allow_infinity=True, width=64))


@settings(max_examples=300, deadline=None)
@given(f64_arrays, st.one_of(finite_p, st.sampled_from([0.001, 0.5, 1e-6, 1.0, 1e3])))
def test_frame_and_types_14_45_rounding_properties(x, p):
    keep = bits(x).copy()
    q = quantum(p)
    once = round_to_precision(x, p)
    assert np.array_equal(bits(x), keep)                                   # input untouched
    assert np.array_equal(bits(round_to_precision(once, p)), bits(once))   # idempotent
    with np.errstate(invalid="ignore", over="ignore"):
        inside = (np.abs(x) < 2.0**52 * q) & np.isfinite(np.rint(x / q) * q)
        assert np.array_equal(bits(once[~inside]), bits(x[~inside]))       # NaN bits, inf, large
        r, xi = once[inside], x[inside]
        assert np.all(np.abs(r - xi) <= q / 2)
        assert np.all(np.signbit(r) == np.signbit(xi))                     # sign of zero survives
        assert np.all(np.mod(r, q) == 0)                                   # on the grid


@settings(max_examples=300, deadline=None)
@given(f64_arrays, st.one_of(finite_p, st.sampled_from([0.001, 2.0**-30, 1e3])))
def test_frame_and_types_14_45_fast_path_equals_the_masked_formula(x, p):
    """round_to_precision skips the keep-mask when its result is all finite; bit for bit it
    must equal the plain formula with x restored wherever the rule keeps it."""
    q = quantum(p)
    with np.errstate(invalid="ignore", over="ignore"):
        formula = np.rint(x * (1.0 / q)) * q
        keep = ~(np.abs(x) < 2.0**52 * q) | ~np.isfinite(formula)
    assert np.array_equal(bits(round_to_precision(x, p)), bits(np.where(keep, x, formula)))
    big = np.full(4, 2.0**60) * np.array([1.0, -1.0, 3.0, -5.0])  # |x| >= 2^52 q on the fast path
    assert np.array_equal(bits(round_to_precision(big, 1e-3)), bits(big))
