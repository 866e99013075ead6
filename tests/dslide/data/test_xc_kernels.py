"""The XC text kernels directly: decimal parsing against Python's float, line parsing into CSR against hand-parsed
lines, error codes with the offending token, and row formatting (hand-worked text; float32 values read back)."""

from __future__ import annotations

import numpy as np
import pytest

from dslide.data import _xc_kernels as xk


def parse_value(text: str):
    buf = np.frombuffer(text.encode(), dtype=np.uint8)
    return xk._parse_value(buf, 0, len(buf))


@pytest.mark.parametrize(
    "text", ["0", "1", "-2.5", "+0.125", "3.", ".5", "1e3", "1E-3", "-7.25e+2", "0.1", "123456.789", "1e-30",
             "2.5e-45", "00012.50", "9" * 25, "0." + "3" * 30, "3.4028234e38"],
)  # fmt: skip
def test_values_parse_like_python_float(text):
    """Each accepted decimal equals float(text) to float32 precision (the value is stored as float32)."""
    value, code = parse_value(text)
    assert code == xk.OK
    assert np.float32(value) == np.float32(float(text))


@pytest.mark.parametrize(
    ("text", "code"),
    [("", xk.VALUE_MALFORMED), ("-", xk.VALUE_MALFORMED), (".", xk.VALUE_MALFORMED), ("1e", xk.VALUE_MALFORMED),
     ("1.2.3", xk.VALUE_MALFORMED), ("0x10", xk.VALUE_MALFORMED), ("1e5x", xk.VALUE_MALFORMED),
     ("nan", xk.VALUE_NONFINITE), ("-Inf", xk.VALUE_NONFINITE), ("1e39", xk.VALUE_NONFINITE)],
)  # fmt: skip
def test_bad_values_are_refused(text, code):
    """Malformed decimals and values that are not finite in float32 get their error codes."""
    assert parse_value(text)[1] == code


def test_decimal_to_f64_on_and_off_the_exact_fast_path():
    """mantissa * 10**exp is exact where both are (|exp| <= 22) and matches float() beyond it; 0 is 0."""
    assert xk.decimal_to_f64(0, 500) == 0.0
    assert xk.decimal_to_f64(25, -1) == 2.5
    assert xk.decimal_to_f64(123, 22) == float("123e22")
    assert xk.decimal_to_f64(7, -22) == float("7e-22")
    assert xk.decimal_to_f64(1, 401) == np.inf and xk.decimal_to_f64(1, -401) == 0.0
    assert xk.decimal_to_f64(3, 30) == pytest.approx(3e30, rel=1e-15)


def parse(text: str, num_features=10, num_labels=6, max_points=8):
    buf = np.frombuffer(text.encode(), dtype=np.uint8)
    fp, lp = np.zeros(max_points + 1, np.int64), np.zeros(max_points + 1, np.int64)
    fi, fv = np.zeros(64, np.int32), np.zeros(64, np.float32)
    li = np.zeros(64, np.int32)
    code, a, b, rows = xk.parse_xc(buf, 0, len(buf), num_features, num_labels, max_points, fp, fi, fv, lp, li,
                                   np.zeros(num_features, np.int64), np.zeros(num_labels, np.int64))  # fmt: skip
    token = text.encode()[a:b].decode()
    return code, token, rows, fp[: rows + 1], fi[: fp[rows]], fv[: fp[rows]], lp[: rows + 1], li[: lp[rows]]


def test_lines_parse_into_csr():
    """Hand-parsed: labels first (comma list, a space after a comma tolerated), then id:value features; a line
    of features only has no labels; a blank line is a point with nothing; CRLF endings are fine."""
    code, _, rows, fp, fi, fv, lp, li = parse("3,1 0:1.5 9:-2\r\n 4:0.25\n\n2, 5 7:1e-3\n")
    assert code == xk.OK and rows == 4
    assert fp.tolist() == [0, 2, 3, 3, 4] and fi.tolist() == [0, 9, 4, 7]
    np.testing.assert_array_equal(fv, np.array([1.5, -2, 0.25, 1e-3], dtype=np.float32))
    assert lp.tolist() == [0, 2, 2, 2, 4] and li.tolist() == [3, 1, 2, 5]


@pytest.mark.parametrize(
    ("text", "code", "token", "rows"),
    [("1 0:1\n7 0:1\n", xk.LABEL_OUT_OF_RANGE, "7", 1), ("1,1 0:1\n", xk.LABEL_DUPLICATE, "1", 0),
     ("a 0:1\n", xk.LABEL_MALFORMED, "a", 0), ("1 0:1 12:1\n", xk.FEATURE_OUT_OF_RANGE, "12:1", 0),
     ("1 3:1 3:2\n", xk.FEATURE_DUPLICATE, "3:2", 0), ("1 3-1\n", xk.FEATURE_MALFORMED, "3-1", 0),
     ("1 3:x\n", xk.VALUE_MALFORMED, "3:x", 0), ("1 3:nan\n", xk.VALUE_NONFINITE, "3:nan", 0),
     ("1, 3:0.5\n", xk.LABEL_MALFORMED, "1,", 0)],
)  # fmt: skip
def test_errors_name_the_token_and_the_line(text, code, token, rows):
    """Each error returns its code, the offending token's bytes and how many points were complete before it."""
    got_code, got_token, got_rows, *_ = parse(text)
    assert (got_code, got_token, got_rows) == (code, token, rows)


def test_too_many_points_but_trailing_blank_lines_are_fine():
    """A line beyond max_points is TOO_MANY_POINTS (naming it); blank lines after the last point are not points."""
    assert parse("1 0:1\n2 0:1\n", max_points=1)[:3] == (xk.TOO_MANY_POINTS, "2 0:1", 1)
    assert parse("1 0:1\n  \n\n", max_points=1)[0:3:2] == (xk.OK, 1)


def format_row(labels, feats, vals):
    fp = np.array([0, len(feats)], np.int64)
    lp = np.array([0, len(labels)], np.int64)
    out = np.zeros(12 * len(labels) + 40 * len(feats) + 2, np.uint8)
    n = xk.format_rows(0, 1, fp, np.array(feats, np.int32), np.array(vals, np.float32), lp,
                       np.array(labels, np.int32), out)  # fmt: skip
    return bytes(out[:n]).decode()


def test_format_rows_hand_worked():
    """Labels joined by commas, then ' id:value' with the shortest decimal of each float32, one line per row."""
    line = format_row([7, 0, 12], list(range(9)), [0.5, 3, -2.25, 100, 0.001, 1e-7, 0.1, 0.0, 0.00012])
    assert line == "7,0,12 0:0.5 1:3 2:-2.25 3:100 4:0.001 5:1e-7 6:0.1 7:0 8:0.00012\n"
    assert format_row([], [4], [1.0]) == " 4:1\n"
    assert format_row([3], [], []) == "3\n"


def test_formatted_float32_values_read_back_exactly_and_shortest():
    """Random float32 values of every magnitude are written with no more significant digits than numpy's
    shortest round-trip representation, and parse back to the same float32."""
    rng = np.random.default_rng(0)
    vals = (rng.normal(size=300) * 10.0 ** rng.integers(-30, 30, 300)).astype(np.float32)
    line = format_row([], list(range(len(vals))), vals)
    tokens = line.split()
    assert len(tokens) == len(vals)
    for tok, v in zip(tokens, vals, strict=True):
        text = tok.split(":")[1]
        value, code = parse_value(text)
        assert code == xk.OK and np.float32(value) == v, (text, v)
        digits = len(text.split("e")[0].replace("-", "").replace(".", "").strip("0"))
        shortest = np.format_float_scientific(v, unique=True).split("e")[0].replace("-", "").replace(".", "")
        assert digits <= len(shortest.rstrip("0")) or digits <= 1, (text, v)
