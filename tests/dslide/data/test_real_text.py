"""Real text corpora: text8's cleaning rules, the readers, and the package checks (on small made-up inputs; the
packages themselves are downloaded only by `harness data make real-text`)."""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import hashlib
import zipfile

import pytest

from dslide.data.real_text import (
    WIKI_FRAGMENT,
    PackageFetchError,
    clean_wikipedia,
    clean_wordnet,
    fetch_member,
    normalize,
    read_member,
)

PAGE = """<mediawiki><page><title>Anarchism</title><revision><text xml:space="preserve">'''Anarchism''' is a
[[political philosophy]] that advocates [[Self-governance|self-governed]] societies.&lt;ref&gt;Some source
&lt;/ref&gt; In 1840 it was {{cite book|title=x}} named.{| class="wikitable"
| a || b
|} See [http://example.org the site].
[[Category:Political culture]]
[[de:Anarchismus]]
[[Image:Flag.svg|thumb|left|200px|A black flag]]</text></revision></page>
<page><title>AccessibleComputing</title><revision><text xml:space="preserve">#REDIRECT [[Computer accessibility]]
</text></revision></page></mediawiki>"""


def test_normalize_follows_text8_rules():
    assert normalize("Hello, World! 42 C-3PO") == "hello world four two c three po"
    assert normalize("  ÀB\tc\n") == "b c"


def test_clean_wikipedia_keeps_visible_text_only():
    text = clean_wikipedia(PAGE)
    assert text == (
        "anarchism is a political philosophy that advocates self governed societies in one eight four zero it was "
        "named see the site political culture a black flag"
    )


def test_wordnet_glosses_and_dictzip_members():
    data = "  1 This software and database is being provided\n"
    data += "00001740 03 n 01 entity 0 003 | that which exists; 2 kinds\n"
    assert clean_wordnet(data) == "that which exists two kinds"
    assert read_member("dictzip", gzip.compress(b"Abandon, v. t. To give up")) == "abandon v t to give up"
    assert read_member("wiki-xml-bz2", bz2.compress(PAGE.encode())).startswith("anarchism is a political")
    with pytest.raises(ValueError, match="unknown member kind"):
        read_member("pdf", b"")


def test_a_package_member_is_checked_against_its_digest(tmp_path):
    # A wheel of the pinned name already in the work directory is read, not downloaded again.
    raw = bz2.compress(PAGE.encode())
    with zipfile.ZipFile(tmp_path / "gensim-4.4.0-py3-none-any.whl", "w") as z:
        z.writestr(WIKI_FRAGMENT.member, raw)
    good = dataclasses.replace(WIKI_FRAGMENT, sha256=hashlib.sha256(raw).hexdigest())
    assert fetch_member(good, tmp_path) == raw
    with pytest.raises(PackageFetchError, match=f"has SHA-256 {hashlib.sha256(raw).hexdigest()}, expected"):
        fetch_member(WIKI_FRAGMENT, tmp_path)
    missing = dataclasses.replace(good, member="gensim/none.bz2")
    with pytest.raises(PackageFetchError, match="has no gensim/none.bz2"):
        fetch_member(missing, tmp_path)


def test_a_corpus_puts_every_source_in_both_splits(tmp_path, monkeypatch):
    import dslide.data.real_text as rt

    sources = {"a": "one two three four five six seven eight nine ten", "b": "alpha beta gamma delta epsilon"}
    members = tuple(dataclasses.replace(WIKI_FRAGMENT, package=k, member=k) for k in sources)
    monkeypatch.setitem(rt.CORPORA, "two-sources", members)
    monkeypatch.setattr(rt, "fetch_member", lambda m, work: m.member.encode())
    monkeypatch.setattr(rt, "read_member", lambda kind, raw: sources[raw.decode()])
    tokens = rt.build_corpus("two-sources", tmp_path / "c.txt")
    assert tokens == {"a:a": 10, "b:b": 5}
    words = (tmp_path / "c.txt").read_text().split()
    # the first 80% of each source, then the rest of each: the stream's first 80% holds both sources
    expected = "one two three four five six seven eight alpha beta gamma delta nine ten epsilon"
    assert " ".join(words) == expected
