"""The word-splitting kernels against Python's bytes.split and FNV-1a written out in Python."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dslide.data._text_kernels import count_words, hash_words

MASK = (1 << 64) - 1


def fnv1a(word: bytes) -> int:
    h = 0xCBF29CE484222325
    for c in word:
        h = ((h ^ c) * 0x100000001B3) & MASK
    return h


def second_hash(word: bytes) -> int:
    h = 0x9E3779B97F4A7C15
    for c in word:
        h = ((h + c + 1) * 0xBF58476D1CE4E5B9) & MASK
        h ^= h >> 29
    return h


def run(text: bytes):
    buf = np.frombuffer(text, dtype=np.uint8)
    n = count_words(buf)
    starts, lengths = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    h1, h2 = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    assert hash_words(buf, starts, lengths, h1, h2) == n
    return n, starts, lengths, h1, h2


TEXTS = [b"", b"   \n\t", b"one", b"  lead and trail  ", b"a\tb\nc\rd\x0be\x0cf  g", b"caf\xc3\xa9 na\xefve \xff\x00x",
         b"the cat sat on the mat the end\n" * 3]  # fmt: skip


@pytest.mark.parametrize("text", TEXTS)
def test_words_are_what_bytes_split_finds(text):
    """count_words and the (start, length) spans agree with bytes.split() (ASCII whitespace: space, \\t \\n \\r
    \\v \\f); NUL and non-ASCII bytes belong to words."""
    n, starts, lengths, _, _ = run(text)
    words = text.split()
    assert n == len(words)
    spans = [(m.start(), m.end() - m.start()) for m in re.finditer(rb"[^ \t\n\r\x0b\x0c]+", text)]
    assert list(zip(starts.tolist(), lengths.tolist(), strict=True)) == spans
    assert [text[s : s + ln] for s, ln in spans] == words


@pytest.mark.parametrize("text", TEXTS)
def test_hashes_are_fnv1a_and_the_second_mix(text):
    """h1 is 64-bit FNV-1a of each word; h2 the second multiply-xorshift hash; equal words hash equally."""
    _, _, _, h1, h2 = run(text)
    words = text.split()
    assert h1.tolist() == [fnv1a(w) for w in words]
    assert h2.tolist() == [second_hash(w) for w in words]


def test_fnv1a_known_value():
    """FNV-1a 64 of b'a' is the published test vector 0xaf63dc4c8601ec8c."""
    assert run(b"a")[3].tolist() == [0xAF63DC4C8601EC8C]
