"""Numba kernels for the Extreme Classification text format: parse raw bytes into CSR arrays, format CSR rows.

The Python layer (xc_format.py) reads the header, sizes the output arrays and turns an error code plus byte
offsets into `PATH:LINE: message (token '...')`.
"""

from __future__ import annotations

import numba
import numpy as np

OK = 0
LABEL_MALFORMED = 1
LABEL_OUT_OF_RANGE = 2
LABEL_DUPLICATE = 3
FEATURE_MALFORMED = 4
FEATURE_OUT_OF_RANGE = 5
FEATURE_DUPLICATE = 6
VALUE_MALFORMED = 7
VALUE_NONFINITE = 8
TOO_MANY_POINTS = 9
TOO_MANY_ENTRIES = 10

NEWLINE, CR, SPACE, TAB, COLON, COMMA = 10, 13, 32, 9, 58, 44
DOT, PLUS, MINUS, ZERO, NINE = 46, 43, 45, 48, 57

# 10**k is exact in float64 for k <= 22, so m * 10**k and m / 10**k round once (the classic fast path).
_POW10 = np.array([10.0**k for k in range(23)])
_ID_LIMIT = np.int64(2**31)  # ids are stored as int32; anything at or above this is out of range anyway


@numba.njit(cache=True, inline="always")
def _is_space(c):
    return c == SPACE or c == TAB  # noqa: SIM109 (plain compares compile to the fastest code)


@numba.njit(cache=True)
def decimal_to_f64(mantissa, exp10):
    """mantissa * 10**exp10 as float64 (shared by parser and writer so writing then reading round-trips)."""
    if mantissa == 0:
        return 0.0
    m = float(mantissa)
    if 0 <= exp10 <= 22:
        return m * _POW10[exp10]
    if -22 <= exp10 < 0:
        return m / _POW10[-exp10]
    if exp10 > 400:
        return np.inf
    if exp10 < -400:
        return 0.0
    return m * 10.0**exp10


@numba.njit(cache=True)
def _parse_value(buf, a, b):
    """Parse buf[a:b] as a decimal float. Returns (value, code)."""
    i = a
    neg = False
    if i < b and (buf[i] == PLUS or buf[i] == MINUS):
        neg = buf[i] == MINUS
        i += 1
    if i < b:
        c = buf[i] | 32  # lower-case ASCII letters
        if c == 110 or c == 105:  # 'n'an / 'i'nf(inity)
            return 0.0, VALUE_NONFINITE
    mant = np.int64(0)
    exp10 = 0
    digits = 0
    while i < b and ZERO <= buf[i] <= NINE:
        if mant < 100_000_000_000_000_000:
            mant = mant * 10 + (buf[i] - ZERO)
        else:
            exp10 += 1  # precision beyond 18 digits is dropped, magnitude kept
        digits += 1
        i += 1
    if i < b and buf[i] == DOT:
        i += 1
        while i < b and ZERO <= buf[i] <= NINE:
            if mant < 100_000_000_000_000_000:
                mant = mant * 10 + (buf[i] - ZERO)
                exp10 -= 1
            digits += 1
            i += 1
    if digits == 0:
        return 0.0, VALUE_MALFORMED
    if i < b and (buf[i] == 101 or buf[i] == 69):  # e / E
        i += 1
        eneg = False
        if i < b and (buf[i] == PLUS or buf[i] == MINUS):
            eneg = buf[i] == MINUS
            i += 1
        edigits = 0
        e = 0
        while i < b and ZERO <= buf[i] <= NINE:
            if e < 100_000:
                e = e * 10 + (buf[i] - ZERO)
            edigits += 1
            i += 1
        if edigits == 0:
            return 0.0, VALUE_MALFORMED
        exp10 += -e if eneg else e
    if i != b:
        return 0.0, VALUE_MALFORMED
    v = decimal_to_f64(mant, exp10)
    if neg:
        v = -v
    if not np.isfinite(np.float32(v)):
        return 0.0, VALUE_NONFINITE
    return v, OK


@numba.njit(cache=True)
def parse_xc(
    buf,
    start,
    end,
    num_features,
    num_labels,
    max_points,
    feat_indptr,
    feat_indices,
    feat_values,
    label_indptr,
    label_indices,
    feat_mark,
    label_mark,
):
    """Parse the point lines in buf[start:end] into the preallocated CSR arrays.

    feat_indptr/label_indptr have room for max_points + 1 entries; feat_mark/label_mark are zeroed int64
    arrays used to spot duplicate ids within a line. Returns (code, token_start, token_end, points).
    On error, buf[token_start:token_end] is the offending token.
    """
    row = 0
    nnz = 0
    nlab = 0
    pos = start
    feat_indptr[0] = 0
    label_indptr[0] = 0
    cap_f = feat_indices.shape[0]
    cap_l = label_indices.shape[0]
    while pos < end:
        eol = pos
        while eol < end and buf[eol] != NEWLINE:
            eol += 1
        line_end = eol
        if line_end > pos and buf[line_end - 1] == CR:
            line_end -= 1
        if row >= max_points:
            # Blank lines after the last point are not points; anything else is one too many.
            k = pos
            while k < end and (_is_space(buf[k]) or buf[k] == NEWLINE or buf[k] == CR):
                k += 1
            if k == end:
                break
            e = k
            while e < end and buf[e] != NEWLINE and buf[e] != CR:
                e += 1
            return TOO_MANY_POINTS, k, e, row
        stamp = row + 1
        i = pos
        # The first token is the label list unless it is already a feature (contains ':').
        if i < line_end and not _is_space(buf[i]):
            j = i
            has_colon = False
            while j < line_end and not _is_space(buf[j]):
                if buf[j] == COLON:
                    has_colon = True
                j += 1
            if not has_colon:
                a = i
                while True:
                    b = a
                    while b < line_end and buf[b] != COMMA and not _is_space(buf[b]):
                        b += 1
                    if b == a:
                        return LABEL_MALFORMED, i, j, row
                    lab = np.int64(0)
                    for k in range(a, b):
                        c = buf[k]
                        if c < ZERO or c > NINE:
                            return LABEL_MALFORMED, a, b, row
                        if lab < _ID_LIMIT:
                            lab = lab * 10 + (c - ZERO)
                    if lab >= num_labels:
                        return LABEL_OUT_OF_RANGE, a, b, row
                    if label_mark[lab] == stamp:
                        return LABEL_DUPLICATE, a, b, row
                    label_mark[lab] = stamp
                    if nlab >= cap_l:
                        return TOO_MANY_ENTRIES, a, b, row
                    label_indices[nlab] = lab
                    nlab += 1
                    if b < line_end and buf[b] == COMMA:
                        a = b + 1
                        # Tolerate "1, 2" (a space after the comma), as in the original LSHTC files.
                        while a < line_end and _is_space(buf[a]):
                            a += 1
                        if a >= line_end:
                            return LABEL_MALFORMED, i, line_end, row
                        j = a
                        while j < line_end and not _is_space(buf[j]):
                            if buf[j] == COLON:  # "1, 3:0.5": a dangling comma before the features
                                return LABEL_MALFORMED, i, b + 1, row
                            j += 1
                        continue
                    break
                i = b
        # Features: whitespace-separated id:value tokens.
        while True:
            while i < line_end and _is_space(buf[i]):
                i += 1
            if i >= line_end:
                break
            a = i
            while i < line_end and not _is_space(buf[i]):
                i += 1
            b = i
            k = a
            fid = np.int64(0)
            while k < b and ZERO <= buf[k] <= NINE:
                if fid < _ID_LIMIT:
                    fid = fid * 10 + (buf[k] - ZERO)
                k += 1
            if k == a or k >= b or buf[k] != COLON:
                return FEATURE_MALFORMED, a, b, row
            val, code = _parse_value(buf, k + 1, b)
            if code != OK:
                return code, a, b, row
            if fid >= num_features:
                return FEATURE_OUT_OF_RANGE, a, b, row
            if feat_mark[fid] == stamp:
                return FEATURE_DUPLICATE, a, b, row
            feat_mark[fid] = stamp
            if nnz >= cap_f:
                return TOO_MANY_ENTRIES, a, b, row
            feat_indices[nnz] = fid
            feat_values[nnz] = val
            nnz += 1
        row += 1
        feat_indptr[row] = nnz
        label_indptr[row] = nlab
        pos = eol + 1
    return OK, 0, 0, row


@numba.njit(cache=True)
def _write_int(out, o, v):
    if v == 0:
        out[o] = ZERO
        return o + 1
    n = 0
    t = v
    while t > 0:
        n += 1
        t //= 10
    for k in range(n - 1, -1, -1):
        out[o + k] = ZERO + v % 10
        v //= 10
    return o + n


@numba.njit(cache=True)
def _write_float(out, o, v32):
    """Shortest decimal (<= 17 significant digits) that reads back as exactly v32 through decimal_to_f64."""
    x = np.float64(v32)
    if x == 0.0:
        out[o] = ZERO
        return o + 1
    if x < 0:
        out[o] = MINUS
        o += 1
        x = -x
    target = np.float32(x)
    e10 = int(np.floor(np.log10(x)))
    mant = np.int64(0)
    exp10 = 0
    for p in range(1, 18):
        s = p - 1 - e10
        if 0 <= s <= 22:
            scaled = x * _POW10[s]
        elif -22 <= s < 0:
            scaled = x / _POW10[-s]
        else:
            scaled = x * 10.0**s
        mant = np.int64(np.round(scaled))
        exp10 = -s
        if np.float32(decimal_to_f64(mant, exp10)) == target:
            break
    while mant % 10 == 0:
        mant //= 10
        exp10 += 1
    nd = 0
    t = mant
    while t > 0:
        nd += 1
        t //= 10
    point = nd + exp10  # digits before the decimal point
    if exp10 >= 0 and point <= 16:
        o = _write_int(out, o, mant)
        for _ in range(exp10):
            out[o] = ZERO
            o += 1
        return o
    if exp10 < 0 and point > 0:
        p0 = o
        o = _write_int(out, o, mant)
        # Shift the fractional digits right by one to make room for the decimal point.
        for k in range(o - 1, p0 + point - 1, -1):
            out[k + 1] = out[k]
        out[p0 + point] = DOT
        return o + 1
    if exp10 < 0 and point > -5:
        out[o] = ZERO
        out[o + 1] = DOT
        o += 2
        for _ in range(-point):
            out[o] = ZERO
            o += 1
        return _write_int(out, o, mant)
    # Scientific: d[.ddd]e-XX
    p0 = o
    o = _write_int(out, o, mant)
    if nd > 1:
        for k in range(o - 1, p0, -1):
            out[k + 1] = out[k]
        out[p0 + 1] = DOT
        o += 1
    out[o] = 101
    o += 1
    e = point - 1
    if e < 0:
        out[o] = MINUS
        o += 1
        e = -e
    return _write_int(out, o, e)


@numba.njit(cache=True)
def format_rows(row_start, row_stop, feat_indptr, feat_indices, feat_values, label_indptr, label_indices, out):
    """Write rows [row_start, row_stop) as XC lines into out; returns the number of bytes used.

    out must hold at least 12 bytes per label, 40 per feature and 2 per row.
    """
    o = 0
    for r in range(row_start, row_stop):
        first = True
        for k in range(label_indptr[r], label_indptr[r + 1]):
            if not first:
                out[o] = COMMA
                o += 1
            o = _write_int(out, o, label_indices[k])
            first = False
        for k in range(feat_indptr[r], feat_indptr[r + 1]):
            out[o] = SPACE
            o += 1
            o = _write_int(out, o, feat_indices[k])
            out[o] = COLON
            o += 1
            o = _write_float(out, o, feat_values[k])
        out[o] = NEWLINE
        o += 1
    return o
