"""Real English text that the package registries carry, cleaned by text8's rules, as registered corpora.

text8 is the first 10^8 bytes of an English Wikipedia dump cleaned by Matt Mahoney's rules: only the visible text
of each article (markup, references, templates and tables removed, a link kept as its visible text), lowercase
letters a-z, digits spelled out ("1" -> " one "), every other run of characters one space. The real text8 cannot be
downloaded on this project's development machine; these corpora can, by package name:

- `real-text-wiki`: the first articles of an English Wikipedia dump (text8's own source), shipped in gensim's
  wheel on PyPI as test data.
- `real-text`: that fragment, then the GCIDE dictionary (Debian's dict-gcide: Webster's 1913 with additions) and
  WordNet's glosses (Debian's wordnet-base). Encyclopaedic, then dictionary prose: real English, not text8.

Each member is checked against its SHA-256, so the corpus is the same on every machine; another package version
is refused with the digest it had.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PackageMember:
    """One file inside a registry package: where it is, and its digest (of the file as stored in the package)."""

    registry: str  # "pypi" or "debian"
    package: str
    version: str
    member: str
    sha256: str
    kind: str  # how to read it: "wiki-xml-bz2", "dictzip", "wordnet-data"


WIKI_FRAGMENT = PackageMember(
    "pypi", "gensim", "4.4.0",
    "gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
    "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d", "wiki-xml-bz2",
)  # fmt: skip
GCIDE = PackageMember(
    "debian", "dict-gcide", "0.48.5+nmu2", "./usr/share/dictd/gcide.dict.dz",
    "3e6b2cdcbc1b3664c2f1466e3c8e44012e815c4c67fa83fa61f39777cd6e8517", "dictzip",
)  # fmt: skip
WORDNET = tuple(
    PackageMember("debian", "wordnet-base", "1:3.0-37", f"./usr/share/wordnet/data.{pos}", digest, "wordnet-data")
    for pos, digest in (
        ("noun", "fea17d2f9656611334eac790e5d69e47645fa180c4aa481fb4cd9b3520754ca2"),
        ("verb", "adcf43e35b581e8036d8b5a52d63d9cd3d3b4870b2720d3c03c799df44777bc2"),
        ("adj", "c89120dfc1f046ddff4a631bf9b7e9fa1a36b5e86565a23bf82dbe14f30b88a7"),
        ("adv", "444a63bf3955080ab7524f5079cfc07ff9bc682cb98bdb1db73b0fb9829f1139"),
    )
)

CORPORA: dict[str, tuple[PackageMember, ...]] = {
    "real-text-wiki": (WIKI_FRAGMENT,),
    "real-text": (WIKI_FRAGMENT, GCIDE, *WORDNET),
}


class PackageFetchError(RuntimeError):
    """A registry package could not be had, or a member did not match its digest."""


# --- text8's cleaning rules ---

_DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_DIGITS = {str(d): f" {w} " for d, w in enumerate(_DIGIT_NAMES)}
_NOT_LETTERS = re.compile(r"[^a-z]+")


def normalize(text: str) -> str:
    """Lowercase a-z, digits spelled out, every other run of characters one space (text8's last step)."""
    text = text.lower()
    for digit, word in _DIGITS.items():
        text = text.replace(digit, word)
    return _NOT_LETTERS.sub(" ", text).strip()


_WIKI_STEPS = [
    (re.compile(r"<ref[^<]*</ref>", re.S), ""),  # references
    (re.compile(r"<[^>]*>"), ""),  # xhtml tags
    (re.compile(r"\[https?:[^\] ]*"), "["),  # external links: keep the visible text
    (re.compile(r"\|(thumb|left|right|\d+px)", re.I), ""),  # image options: keep the caption
    (re.compile(r"\[\[image:[^\[\]]*\|", re.I), ""),
    (re.compile(r"\[\[category:([^|\]]*)[^\]]*\]\]", re.I), r"[[\1]]"),  # categories as plain names
    (re.compile(r"\[\[[a-z\-]*:[^\]]*\]\]"), ""),  # links to other languages
    (re.compile(r"\[\[[^|\]]*\|"), "[["),  # a link's target: keep its visible text
    (re.compile(r"\{\{[^}]*\}\}"), ""),  # templates
    (re.compile(r"\{[^}]*\}"), ""),  # tables
    (re.compile(r"[\[\]]"), ""),
    (re.compile(r"&[^;\s]*;"), " "),  # remaining entities
]
_TEXT = re.compile(r"<text[^>]*>(.*?)</text>", re.S)


def clean_wikipedia(xml: str) -> str:
    """The visible text of every article of a MediaWiki XML dump (redirects skipped), by text8's rules."""
    out = []
    for body in _TEXT.findall(xml):
        if body.lstrip().lower().startswith("#redirect"):
            continue
        body = body.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
        for pattern, repl in _WIKI_STEPS:
            body = pattern.sub(repl, body)
        out.append(normalize(body))
    return " ".join(t for t in out if t)


def clean_wordnet(data: str) -> str:
    """WordNet's glosses (the text after ' | ' on each synset line; the licence header lines start with spaces)."""
    glosses = [line.split(" | ", 1)[1] for line in data.splitlines() if line[:1] != " " and " | " in line]
    return normalize(" ".join(glosses))


def read_member(kind: str, raw: bytes) -> str:
    """A member's bytes as cleaned text."""
    if kind == "wiki-xml-bz2":
        return clean_wikipedia(bz2.decompress(raw).decode("utf-8", errors="replace"))
    if kind == "dictzip":  # dictzip is gzip with random-access extras: gzip reads it
        return normalize(gzip.decompress(raw).decode("utf-8", errors="replace"))  # a dictd database's text
    if kind == "wordnet-data":
        return clean_wordnet(raw.decode("utf-8", errors="replace"))
    raise ValueError(f"unknown member kind {kind!r}")


# --- getting the packages ---


def fetch_member(m: PackageMember, workdir: Path) -> bytes:
    """The member's bytes, from the package downloaded by name (pip or apt), checked against its digest."""
    workdir.mkdir(parents=True, exist_ok=True)
    if m.registry == "pypi":
        raw = _pypi_member(m, workdir)
    elif m.registry == "debian":
        raw = _debian_member(m, workdir)
    else:
        raise ValueError(f"unknown registry {m.registry!r}")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != m.sha256:
        raise PackageFetchError(
            f"{m.package} {m.version}: {m.member} has SHA-256 {digest}, expected {m.sha256} "
            "(another build of the package?)"
        )
    return raw


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PackageFetchError(f"{what}: {' '.join(cmd)} failed: {e}") from e
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise PackageFetchError(f"{what}: {' '.join(cmd)} exited {r.returncode}: {' / '.join(tail)}")


def _pypi_member(m: PackageMember, workdir: Path) -> bytes:
    wheels = list(workdir.glob(f"{m.package}-{m.version}-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", f"{m.package}=={m.version}", "--no-deps", "--only-binary=:all:"]
        _run([*cmd, "--quiet", "-d", str(workdir)], workdir, f"PyPI package {m.package}")
        wheels = list(workdir.glob(f"{m.package}-{m.version}-*.whl"))
    if not wheels:
        raise PackageFetchError(f"pip downloaded no wheel of {m.package}=={m.version} into {workdir}")
    with zipfile.ZipFile(wheels[0]) as z:
        try:
            return z.read(m.member)
        except KeyError as e:
            raise PackageFetchError(f"{wheels[0].name} has no {m.member}") from e


def _debian_member(m: PackageMember, workdir: Path) -> bytes:
    quoted = m.version.replace(":", "%3a")
    debs = list(workdir.glob(f"{m.package}_{quoted}_*.deb"))
    if not debs:
        if shutil.which("apt-get") is None:
            raise PackageFetchError(f"{m.package} is a Debian package: apt-get is needed to download it")
        _run(["apt-get", "download", f"{m.package}={m.version}"], workdir, f"Debian package {m.package}")
        debs = list(workdir.glob(f"{m.package}_{quoted}_*.deb"))
    if not debs:
        raise PackageFetchError(f"apt-get downloaded no {m.package}_{m.version} into {workdir}")
    if shutil.which("dpkg-deb") is None:
        raise PackageFetchError("dpkg-deb is needed to read a Debian package")
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(debs[0])], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        f = t.extractfile(m.member)
        if f is None:
            raise PackageFetchError(f"{debs[0].name} has no {m.member}")
        return f.read()


def build_corpus(name: str, out: Path, workdir: Path | None = None, train_fraction: float = 0.8) -> dict[str, int]:
    """Write corpus NAME (cleaned, space-separated words) to `out`; returns tokens per member.

    Every member's first `train_fraction` of words comes first, then every member's rest, so that the first
    `train_fraction` of the whole stream (the training split) and the rest (the test split) each hold every
    source in the same proportions, instead of a test split made of the last source alone."""
    members = CORPORA[name]
    tokens: dict[str, int] = {}
    heads, tails = [], []
    with tempfile.TemporaryDirectory(prefix="dslide-text-") as tmp:
        work = Path(workdir) if workdir else Path(tmp)
        for m in members:
            words = read_member(m.kind, fetch_member(m, work)).split()
            tokens[f"{m.package}:{Path(m.member).name}"] = len(words)
            cut = int(len(words) * train_fraction)
            heads.append(" ".join(words[:cut]))
            tails.append(" ".join(words[cut:]))
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".tmp")
    partial.write_text(" ".join(t for t in heads + tails if t) + "\n")
    partial.replace(out)
    return tokens
