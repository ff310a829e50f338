"""Numba kernels of the text parsers (LIBSVM / svmlight and dense delimited text).

Each kernel parses complete lines of a byte block (``uint8``) into a preallocated dense row
block, stops at a row boundary when that block is full, and reports everything it could not
decide itself back to the Python driver in ``parse.py``:

* numbers the exact fast path cannot convert (more than 15 significant digits, large
  exponents, ``nan``, ``inf``, quoted or malformed tokens) are listed in ``slow`` as
  ``(row, column, start, end)`` and converted by Python's ``float`` (correctly rounded);
* labels are returned as byte spans, never converted here, so any label convention works;
* structural errors return a negative status and the byte offset of the offending token.

The fast path converts ``m * 10**e`` with an integer mantissa ``m <= 2**53`` and
``|e| <= 22`` by one IEEE multiplication or division of two exactly representable numbers,
which is correctly rounded (Clinger 1990), so every value equals ``float(token)`` bit for bit.
That argument needs strict IEEE division: these kernels are compiled WITHOUT the fastmath
flags of ``_config.FASTMATH`` (``arcp`` would allow ``m / p`` to become ``m * (1 / p)``,
which is not correctly rounded). They do no floating-point work that fastmath would speed up.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: status codes returned by the parse kernels (negative: an error in the text).
DONE, FULL, SLOW_FULL, NNZ_FULL = 0, 1, 2, 3
E_INDEX, E_COLON, E_RANGE, E_ZERO, E_EMPTY, E_NCOLS, E_ORDER, E_DUPLICATE = (
    -1, -2, -3, -4, -5, -6, -7, -8)

_P10 = np.array([10.0**k for k in range(23)], dtype=np.float64)
_MAX_EXACT = 2**53

_NL, _CR, _SP, _TAB, _HASH, _COLON = 10, 13, 32, 9, 35, 58


@njit(nogil=True, cache=True)
def _is_ws(c):
    return c == _SP or c == _TAB or c == _CR


@njit(nogil=True, cache=True)
def _parse_number(buf, s, e):  # IN, scalars
    """Exact fast-path conversion of buf[s:e]; returns (value, ok)."""
    p = s
    neg = False
    if p < e and (buf[p] == 45 or buf[p] == 43):  # '-' '+'
        neg = buf[p] == 45
        p += 1
    m = 0
    nd = 0
    exp10 = 0
    any_digit = False
    while p < e and 48 <= buf[p] <= 57:
        d = buf[p] - 48
        any_digit = True
        if m != 0 or d != 0:
            if nd >= 18:
                return 0.0, False
            m = m * 10 + d
            nd += 1
        p += 1
    if p < e and buf[p] == 46:  # '.'
        p += 1
        while p < e and 48 <= buf[p] <= 57:
            d = buf[p] - 48
            any_digit = True
            if m != 0 or d != 0:
                if nd >= 18:
                    return 0.0, False
                m = m * 10 + d
                nd += 1
            exp10 -= 1
            p += 1
    if not any_digit:
        return 0.0, False
    if p < e and (buf[p] == 101 or buf[p] == 69):  # 'e' 'E'
        p += 1
        eneg = False
        if p < e and (buf[p] == 45 or buf[p] == 43):
            eneg = buf[p] == 45
            p += 1
        ev = 0
        ed = 0
        while p < e and 48 <= buf[p] <= 57:
            if ev < 100000:
                ev = ev * 10 + (buf[p] - 48)
            ed += 1
            p += 1
        if ed == 0:
            return 0.0, False
        exp10 += -ev if eneg else ev
    if p != e:
        return 0.0, False
    if m == 0:
        return (-0.0 if neg else 0.0), True
    if m > _MAX_EXACT:
        return 0.0, False
    if 0 <= exp10 <= 22:
        v = np.float64(m) * _P10[exp10]
    elif -22 <= exp10 < 0:
        v = np.float64(m) / _P10[-exp10]
    else:
        return 0.0, False
    return (-v if neg else v), True


@njit(nogil=True, cache=True)
def _line_end(buf, p, n):  # IN, scalars
    while p < n and buf[p] != _NL:
        p += 1
    return p


@njit(nogil=True, cache=True)
def _content_end(buf, p, e):  # IN, scalars: the line up to a '#' comment
    q = p
    while q < e and buf[q] != _HASH:
        q += 1
    return q


#: what :func:`_next_pair` found (besides the error codes)
_LINE_END, _PAIR, _QID = 0, 1, 2


@njit(nogil=True, cache=True, inline="always")
def _next_pair(buf, p, ce, index_base):  # IN, scalars
    """The next ``index:value`` token of a LIBSVM line, from byte ``p`` to the content end
    ``ce``: ``(status, ts, vs, p, col)``, status ``_PAIR`` (the 0-based column ``col`` and
    the value ``buf[vs:p]``), ``_LINE_END``, ``_QID`` (a ``qid:`` token, skipped) or an error
    code (E_COLON, E_INDEX, E_EMPTY, E_ZERO) for the token that starts at ``ts``; ``p`` is
    then the byte after the token."""
    while p < ce and _is_ws(buf[p]):
        p += 1
    if p >= ce:
        return _LINE_END, p, p, p, 0
    ts = p
    while p < ce and buf[p] != _COLON and not _is_ws(buf[p]):
        p += 1
    if p >= ce or buf[p] != _COLON:
        return E_COLON, ts, ts, p, 0
    if p - ts == 3 and buf[ts] == 113 and buf[ts + 1] == 105 and buf[ts + 2] == 100:
        while p < ce and not _is_ws(buf[p]):  # 'qid:<value>' is ignored
            p += 1
        return _QID, ts, ts, p, 0
    if p == ts:
        return E_INDEX, ts, ts, p, 0
    idx = 0
    for q in range(ts, p):
        c = buf[q]
        if c < 48 or c > 57 or idx > 1_000_000_000_000:
            return E_INDEX, ts, ts, p, 0
        idx = idx * 10 + (c - 48)
    p += 1
    vs = p
    while p < ce and not _is_ws(buf[p]):
        p += 1
    if p == vs:
        return E_EMPTY, ts, vs, p, 0
    col = idx - index_base
    if col < 0:
        return E_ZERO, ts, vs, p, 0
    return _PAIR, ts, vs, p, col


@njit(nogil=True, cache=True)
def _parse_libsvm(
    buf,  # IN  uint8[:]   complete lines
    X,  # OUT float[:, :] rows row0.. (zeroed by the caller)
    label_span,  # OUT int64[:, 2] byte span of each row's label
    row_line,  # OUT int64[:]  line number (0-based, whole file) of each row
    slow,  # OUT int64[:, 4] (row, col, start, end) of values for Python to convert
    stats,  # INOUT int64[5] [max index seen, min index seen, number of slow entries,
    #         values stored, line (0-based) of the max index]
    start,
    row0,
    line0,
    index_base,
    resume,  # -1: ``start`` is a line start; >= 0: it is a token of row ``row0``'s line
):
    """Parse LIBSVM lines from ``buf[start:]`` into ``X[row0:]``.

    Returns ``(pos, row, line, status, err_pos)``: the next byte to parse, the next free row,
    the next line number, a status code (DONE, FULL, SLOW_FULL or an error) and, for an
    error, the byte offset of the offending token. SLOW_FULL stops inside a row when ``slow``
    is full: the driver converts the listed values, then calls again with ``start=pos`` and
    ``resume=0`` to finish that row (so ``slow`` never has to grow, however long the line).
    """
    n = buf.shape[0]
    d = X.shape[1]
    cap = slow.shape[0]
    pos = start
    r = row0
    line = line0
    mid_row = resume >= 0
    while pos < n:
        e = _line_end(buf, pos, n)
        ce = _content_end(buf, pos, e)
        p = pos
        if not mid_row:
            while p < ce and _is_ws(buf[p]):
                p += 1
            if p >= ce:  # blank or comment-only line
                pos = e + 1
                line += 1
                continue
            if r >= X.shape[0]:
                return pos, r, line, FULL, 0
            ls = p
            while p < ce and not _is_ws(buf[p]):
                p += 1
            label_span[r, 0] = ls
            label_span[r, 1] = p
        mid_row = False
        while True:
            status, ts, vs, p, col = _next_pair(buf, p, ce, index_base)
            if status == _LINE_END:
                break
            if status == _QID:
                continue
            if status < 0:
                return pos, r, line, status, ts
            idx = col + index_base
            if col >= d:
                return pos, r, line, E_RANGE, ts
            v, ok = _parse_number(buf, vs, p)
            if not ok and stats[2] >= cap:  # resume at this token once `slow` is emptied
                return ts, r, line, SLOW_FULL, 0
            if idx > stats[0]:
                stats[0] = idx
                stats[4] = line
            if idx < stats[1]:
                stats[1] = idx
            stats[3] += 1
            if ok:
                X[r, col] = v
            else:
                k = stats[2]
                slow[k, 0] = r
                slow[k, 1] = col
                slow[k, 2] = vs
                slow[k, 3] = p
                stats[2] = k + 1
        row_line[r] = line
        r += 1
        pos = e + 1
        line += 1
    return n, r, line, DONE, 0


@njit(nogil=True, cache=True)
def _parse_libsvm_csr(
    buf,  # IN  uint8[:]   complete lines
    indptr,  # OUT int64[:] row pointers of rows row0.. (indptr[row0] set by the caller)
    indices,  # OUT int32/int64[:] column of each stored value
    data,  # OUT float[:] stored values
    label_span,  # OUT int64[:, 2] byte span of each row's label
    row_line,  # OUT int64[:]  line number (0-based, whole file) of each row
    slow,  # OUT int64[:, 4] (position in data, col, start, end) of values for Python
    stats,  # INOUT int64[5] as in _parse_libsvm
    start,
    row0,
    line0,
    index_base,
    n_features,
    resume,  # -1: ``start`` is a line start; >= 0: a token of row ``row0``'s line, whose
    #          values so far are data[indptr[row0]:indptr[row0 + 1]]
):
    """:func:`_parse_libsvm` into CSR arrays: row ``r``'s values go to
    ``data[indptr[r]:indptr[r + 1]]``. Indices must increase strictly within a row
    (``E_ORDER`` for a smaller one, ``E_DUPLICATE`` for a repeated one). NNZ_FULL: ``data``
    cannot hold the next value; as for SLOW_FULL, ``pos`` is then the token to resume at and
    ``indptr[row + 1]`` the end of the row's values so far: the driver grows ``indices`` and
    ``data`` and calls again with ``resume=0``."""
    n = buf.shape[0]
    d_cap = data.shape[0]
    cap = slow.shape[0]
    pos = start
    r = row0
    line = line0
    mid_row = resume >= 0
    k = indptr[r]
    last = -1
    if mid_row:
        k = indptr[r + 1]
        last = indices[k - 1] if k > indptr[r] else -1
    while pos < n:
        e = _line_end(buf, pos, n)
        ce = _content_end(buf, pos, e)
        p = pos
        if not mid_row:
            while p < ce and _is_ws(buf[p]):
                p += 1
            if p >= ce:  # blank or comment-only line
                pos = e + 1
                line += 1
                continue
            if r >= row_line.shape[0]:
                return pos, r, line, FULL, 0
            ls = p
            while p < ce and not _is_ws(buf[p]):
                p += 1
            label_span[r, 0] = ls
            label_span[r, 1] = p
            k = indptr[r]
            last = -1
        mid_row = False
        while True:
            status, ts, vs, p, col = _next_pair(buf, p, ce, index_base)
            if status == _LINE_END:
                break
            if status == _QID:
                continue
            if status < 0:
                return pos, r, line, status, ts
            idx = col + index_base
            if col >= n_features:
                return pos, r, line, E_RANGE, ts
            if col == last:
                return pos, r, line, E_DUPLICATE, ts
            if col < last:
                return pos, r, line, E_ORDER, ts
            if k >= d_cap:  # resume at this token once the driver has grown data
                indptr[r + 1] = k
                return ts, r, line, NNZ_FULL, 0
            v, ok = _parse_number(buf, vs, p)
            if not ok and stats[2] >= cap:  # resume at this token once `slow` is emptied
                indptr[r + 1] = k
                return ts, r, line, SLOW_FULL, 0
            if idx > stats[0]:
                stats[0] = idx
                stats[4] = line
            if idx < stats[1]:
                stats[1] = idx
            stats[3] += 1
            indices[k] = col
            if ok:
                data[k] = v
            else:
                j = stats[2]
                slow[j, 0] = k
                slow[j, 1] = col
                slow[j, 2] = vs
                slow[j, 3] = p
                stats[2] = j + 1
            k += 1
            last = col
        row_line[r] = line
        r += 1
        indptr[r] = k
        pos = e + 1
        line += 1
    return n, r, line, DONE, 0


@njit(nogil=True, cache=True)
def _parse_dense(
    buf,  # IN  uint8[:]   complete lines
    X,  # OUT float[:, :] rows row0..
    label_span,  # OUT int64[:, 2]
    row_line,  # OUT int64[:]
    slow,  # OUT int64[:, 4]
    stats,  # INOUT int64[5] [unused, unused, number of slow entries, unused, unused]
    start,
    row0,
    line0,
    label_col,
    n_cols,
    delim,
    resume,  # -1: ``start`` is a line start; >= 0: field ``resume`` of row ``row0`` starts there
):
    """Parse delimited dense lines (``delim`` a byte, or -1 for runs of whitespace).

    Every row must have ``n_cols`` fields; field ``label_col`` is the label, the others are
    the features in order. Returns ``(pos, row, line, status, err_pos)`` as ``_parse_libsvm``;
    for SLOW_FULL ``err_pos`` is the field to resume at (``resume=err_pos``, ``start=pos``).
    """
    n = buf.shape[0]
    cap = slow.shape[0]
    pos = start
    r = row0
    line = line0
    mid_row = resume >= 0
    while pos < n:
        e = _line_end(buf, pos, n)
        ce = _content_end(buf, pos, e)
        p = pos
        k = 0
        if mid_row:
            k = resume
            mid_row = False
        else:
            while p < ce and _is_ws(buf[p]):
                p += 1
            if p >= ce:
                pos = e + 1
                line += 1
                continue
            if r >= X.shape[0]:
                return pos, r, line, FULL, 0
        while True:
            # one field: [ts, te) with surrounding blanks stripped
            while p < ce and _is_ws(buf[p]) and (delim < 0 or buf[p] != delim):
                p += 1
            ts = p
            if delim < 0:
                while p < ce and not _is_ws(buf[p]):
                    p += 1
                te = p
            else:
                while p < ce and buf[p] != delim:
                    p += 1
                te = p
                while te > ts and _is_ws(buf[te - 1]):
                    te -= 1
            if k >= n_cols:
                return pos, r, line, E_NCOLS, ts
            if te == ts:
                if delim < 0:
                    break
                return pos, r, line, E_EMPTY, ts
            if k == label_col:
                label_span[r, 0] = ts
                label_span[r, 1] = te
            else:
                col = k if k < label_col else k - 1
                v, ok = _parse_number(buf, ts, te)
                if ok:
                    X[r, col] = v
                else:
                    s = stats[2]
                    if s >= cap:  # resume at this field once `slow` is emptied
                        return ts, r, line, SLOW_FULL, k
                    slow[s, 0] = r
                    slow[s, 1] = col
                    slow[s, 2] = ts
                    slow[s, 3] = te
                    stats[2] = s + 1
            k += 1
            if delim < 0:
                while p < ce and _is_ws(buf[p]):
                    p += 1
                if p >= ce:
                    break
            else:
                if p >= ce:
                    break
                p += 1  # past the delimiter
        if k != n_cols:
            return pos, r, line, E_NCOLS, pos
        row_line[r] = line
        r += 1
        pos = e + 1
        line += 1
    return n, r, line, DONE, 0


@njit(nogil=True, cache=True)
def _scan_libsvm(
    buf,  # IN  uint8[:]
    stats,  # INOUT int64[10] [rows, max index, min index, rows with index 0, rows with an
    #         index, lines read, line of the first index 0, line of the first row with
    #         indices but no index 0, index:value tokens, line of the max index]; lines are
    #         1-based and count blank and comment lines
):
    """Count the rows and the extreme feature indices of complete LIBSVM lines, and where
    index 0 occurs (a file is read as 0-based in "auto" mode only if every row with indices
    has index 0; a stray ``0:`` in a 1-based file must not re-base it).

    Malformed tokens are skipped here; the parse pass reports them with their line.
    """
    n = buf.shape[0]
    pos = 0
    while pos < n:
        e = _line_end(buf, pos, n)
        ce = _content_end(buf, pos, e)
        stats[5] += 1
        p = pos
        while p < ce and _is_ws(buf[p]):
            p += 1
        if p < ce:
            stats[0] += 1
            has_index = False
            has_zero = False
            while p < ce and not _is_ws(buf[p]):  # the label
                p += 1
            while p < ce:
                while p < ce and _is_ws(buf[p]):
                    p += 1
                ts = p
                idx = 0
                digits = True
                while p < ce and buf[p] != _COLON and not _is_ws(buf[p]):
                    c = buf[p]
                    if c < 48 or c > 57 or idx > 1_000_000_000_000:
                        digits = False
                    else:
                        idx = idx * 10 + (c - 48)
                    p += 1
                if p < ce and buf[p] == _COLON and digits and p > ts:
                    has_index = True
                    stats[8] += 1
                    if idx == 0:
                        has_zero = True
                    if idx > stats[1]:
                        stats[1] = idx
                        stats[9] = stats[5]
                    if idx < stats[2]:
                        stats[2] = idx
                while p < ce and not _is_ws(buf[p]):
                    p += 1
            if has_index:
                stats[4] += 1
                if has_zero:
                    stats[3] += 1
                    if stats[6] == 0:
                        stats[6] = stats[5]
                elif stats[7] == 0:
                    stats[7] = stats[5]
        pos = e + 1


@njit(nogil=True, cache=True)
def _scan_rows(
    buf,  # IN  uint8[:]
    stats,  # INOUT int64[10] [rows, unused...]
):
    """Count the non-blank, non-comment lines of a dense text block."""
    n = buf.shape[0]
    pos = 0
    while pos < n:
        e = _line_end(buf, pos, n)
        ce = _content_end(buf, pos, e)
        p = pos
        while p < ce and _is_ws(buf[p]):
            p += 1
        if p < ce:
            stats[0] += 1
        pos = e + 1
