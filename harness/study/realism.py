"""`harness data realism`: how much a dataset behaves like the real one it stands for. Every statistic is *computed*
from the files and shown beside the published value (with its source), a tolerance and a verdict; the figures show
label frequency against rank and points per label. A statistic that depends on the number of points (coverage,
points per label) is judged only on a set of the published size: a smaller set is a sample, and a random sample
of the real set would miss its rare labels too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dslide.data.dataset import SparseDataset
from harness.plotting import pyplot, save_figure
from harness.study.ceiling import count_predictor_p_at_1, hits, one_feature_per_point

XC_REPO = "Extreme Classification Repository (Bhatia et al.)"
NOTES = "estimate from a power law with the published mean (docs/data.md)"


@dataclass(frozen=True)
class Reference:
    """A published value and how close a stand-in must come: |value - target| <= tolerance, or within [lo, hi]."""

    name: str
    target: float | None  # None: only the range counts
    lo: float
    hi: float
    source: str
    size_dependent: bool = False  # judged only when the set has the published number of points

    def verdict(self, value: float, full_size: bool) -> str:
        if self.size_dependent and not full_size:
            return "sample"
        return "ok" if self.lo <= value <= self.hi else "off"

    def describe(self) -> str:
        if self.target is None:
            return f"{_fmt(self.lo)}-{_fmt(self.hi)}"
        return f"{_fmt(self.target)} ({_fmt(self.lo)}-{_fmt(self.hi)})"


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 and float(x).is_integer() else f"{x:.4g}"


AMAZON_670K = {
    "train_points": Reference("train points", 490_449, 490_449, 490_449, XC_REPO, size_dependent=True),
    "test_points": Reference("test points", 153_025, 153_025, 153_025, XC_REPO, size_dependent=True),
    "features": Reference("features", 135_909, 135_909, 135_909, XC_REPO),
    "labels": Reference("labels", 670_091, 670_091, 670_091, XC_REPO),
    "nnz_per_point": Reference("nonzeros per point", 75.68, 72.68, 78.68, XC_REPO + "; amzn/pecos nnz(X)"),
    "labels_per_point": Reference("labels per point", 5.45, 5.35, 5.55, XC_REPO + "; amzn/pecos nnz(Y)"),
    "points_per_label": Reference("points per label (all labels)", 3.99, 3.89, 4.09, XC_REPO, size_dependent=True),
    "labels_in_train": Reference(
        "share of labels in training", 1.0, 0.99, 1.0, "the XC repository's split rule", size_dependent=True
    ),
    "test_unseen": Reference(
        "share of test label occurrences unseen in training", 0.0, 0.0, 0.01, "the split rule", size_dependent=True
    ),
    "tail_le5": Reference("share of labels with <= 5 training points", None, 0.80, 0.90, NOTES, size_dependent=True),
    "commonest_share": Reference("commonest label: share of points", None, 0.0, 0.05, NOTES),
    "top300_share": Reference("300 commonest labels: share of label occurrences", None, 0.0, 0.12, NOTES),
    "popularity_p1": Reference("popularity P@1 (test)", None, 0.0, 0.05, NOTES),
}

TEXT8 = {
    "tokens": Reference("tokens", 17_005_207, 5_000_000, 17_005_207, "mattmahoney.net/dc/textdata.html (>= 5M here)"),
    "vocabulary": Reference("vocabulary", 253_854, 20_000, 253_854, "text8 (a smaller corpus has fewer words)"),
    "top_word_share": Reference('commonest word ("the"): share of tokens', 0.0624, 0.04, 0.08, "text8"),
    "zipf_slope": Reference("Zipf slope (log count on log rank, ranks 10-10,000)", -1.0, -1.25, -0.8, "Zipf's law"),
    "popularity_p1": Reference("popularity P@1 (skip-gram, window 2)", 0.24, 0.15, 0.30, "Wikipedia text, measured"),
}


def label_counts(ds: SparseDataset) -> np.ndarray:
    return np.bincount(ds.label_indices, minlength=ds.num_labels)


def popularity_p1(train: SparseDataset, test: SparseDataset) -> float:
    """P@1 on test of always predicting the commonest training label."""
    if len(test) == 0:
        return 0.0
    return float(hits(test, np.full(len(test), np.argmax(label_counts(train)))).mean())


def xc_statistics(train: SparseDataset, test: SparseDataset) -> dict[str, float]:
    """The statistics AMAZON_670K names, computed from the two splits."""
    train_counts, test_counts = label_counts(train), label_counts(test)
    seen = train_counts > 0
    occurrences = max(int(train_counts.sum()), 1)
    return {
        "train_points": len(train),
        "test_points": len(test),
        "features": train.num_features,
        "labels": train.num_labels,
        "nnz_per_point": float(np.diff(train.feat_indptr).mean()) if len(train) else 0.0,
        "labels_per_point": float(np.diff(train.label_indptr).mean()) if len(train) else 0.0,
        "points_per_label": float(train_counts.mean()),
        "labels_in_train": float(seen.mean()),
        "test_unseen": float(test_counts[~seen].sum() / max(int(test_counts.sum()), 1)),
        "tail_le5": float((train_counts <= 5).mean()),
        "commonest_share": float(train_counts.max(initial=0) / max(len(train), 1)),
        "top300_share": float(np.sort(train_counts)[-300:].sum() / occurrences),
        "popularity_p1": popularity_p1(train, test),
    }


def text_statistics(train: SparseDataset, test: SparseDataset) -> dict[str, float]:
    """The statistics TEXT8 names, plus the count predictor's P@1 (a ceiling with no published value)."""
    word_counts = np.bincount(np.concatenate((train.feat_indices, test.feat_indices)), minlength=train.num_features)
    ranked = np.sort(word_counts[word_counts > 0])[::-1].astype(np.float64)
    ranks = np.arange(1, len(ranked) + 1)
    window = (ranks >= 10) & (ranks <= 10_000)
    slope = float(np.polyfit(np.log(ranks[window]), np.log(ranked[window]), 1)[0]) if window.sum() > 2 else 0.0
    return {
        "tokens": len(train) + len(test),
        "vocabulary": int((word_counts > 0).sum()),
        "top_word_share": float(ranked[0] / ranked.sum()) if len(ranked) else 0.0,
        "zipf_slope": slope,
        "popularity_p1": popularity_p1(train, test),
        "count_predictor_p1": count_predictor_p_at_1(train, test),
    }


# Statistics shown without a published value to judge them by: what each one is.
UNJUDGED = {
    "count_predictor_p1": "count predictor P@1 (the data's ceiling)",
    "distinct_top1_share": "distinct top-1 labels per test point",
    "truth_points_with_a_300_commonest_label": "points with a label in the 300 commonest (a perfect top-1's most)",
    "truth_labels_held_by_1000_popular": "test labels the 1,000 commonest hold (a perfect top-5's share)",
    "top5_precision_inside_1000_popular": "precision of the model's top-5 inside the 1,000 commonest",
    "top5_precision_outside_1000_popular": "precision of the model's top-5 outside them",
}


def judge(stats: dict[str, float], references: dict[str, Reference], full_size: bool) -> list[dict]:
    """One row per statistic: name, value, published value, tolerance, source, verdict (ok / off / sample / -)."""
    rows = []
    for key, value in stats.items():
        ref = references.get(key)
        rows.append({
            "statistic": ref.name if ref else UNJUDGED.get(key, key),
            "key": key,
            "value": value,
            "published": ref.describe() if ref else "-",
            "source": ref.source if ref else "computed here (no published value)",
            "verdict": ref.verdict(value, full_size) if ref else "-",
        })  # fmt: skip
    return rows


MODEL = {
    "top1_among_300_commonest": Reference(
        "the model's top-1 among the 300 commonest labels", None, 0.0, 0.20,
        "issue 30's target: predictions follow the input, not popularity",
    ),
    "top5_held_by_1000_popular": Reference(
        "share of the model's top-5 that a fixed list of the 1,000 commonest labels holds", None, 0.0, 0.10,
        "issue 30's target",
    ),
}  # fmt: skip


def model_statistics(train: SparseDataset, test: SparseDataset, top5: np.ndarray) -> dict[str, float]:
    """How popularity-driven a trained model's predictions (top5: one row per point of test, 5 labels) are, beside
    what the test labels themselves give (a model that predicted each point's own labels), and whether the
    predictions among the popular labels are right more or less often than the rest (if more, the lean earns P@k)."""
    ranked = np.argsort(-label_counts(train), kind="stable")
    popular = np.zeros(train.num_labels, dtype=bool)
    popular[ranked[:1000]] = True
    top300 = np.zeros(train.num_labels, dtype=bool)
    top300[ranked[:300]] = True
    if len(test) != len(top5):
        raise ValueError(f"{len(top5)} rows of predictions for {len(test)} test points")
    truth = test.label_indices
    point_of = np.repeat(np.arange(len(test)), np.diff(test.label_indptr))
    correct = np.stack([hits(test, top5[:, j]) for j in range(top5.shape[1])], axis=1)  # top5[i, j] is a label of i
    in_list = popular[top5]
    return {
        "top1_among_300_commonest": float(top300[top5[:, 0]].mean()),
        "top5_held_by_1000_popular": float(in_list.mean()),
        "distinct_top1_share": float(len(np.unique(top5[:, 0])) / max(len(top5), 1)),
        "truth_points_with_a_300_commonest_label": float(np.bincount(point_of[top300[truth]], minlength=len(top5))
                                                         .astype(bool).mean()),
        "truth_labels_held_by_1000_popular": float(popular[truth].mean()) if len(truth) else 0.0,
        "top5_precision_inside_1000_popular": float(correct[in_list].mean()) if in_list.any() else 0.0,
        "top5_precision_outside_1000_popular": float(correct[~in_list].mean()) if (~in_list).any() else 0.0,
    }  # fmt: skip


def assess(train: SparseDataset, test: SparseDataset) -> tuple[str, list[dict]]:
    """('xc' or 'text', the judged rows)."""
    if one_feature_per_point(train) and train.num_features == train.num_labels:
        return "text", judge(text_statistics(train, test), TEXT8, full_size=True)
    full = len(train) == AMAZON_670K["train_points"].target and len(test) == AMAZON_670K["test_points"].target
    return "xc", judge(xc_statistics(train, test), AMAZON_670K, full_size=full)


def format_rows(rows: list[dict]) -> str:
    def value(v: float) -> str:
        if isinstance(v, int) or float(v).is_integer():
            return f"{int(v):,}"
        return f"{v:.4f}"

    width = max(len(r["statistic"]) for r in rows)
    lines = [f"{'statistic':<{width}}  {'value':>12}  {'published (tolerance)':>24}  verdict  source"]
    for r in rows:
        head = f"{r['statistic']:<{width}}  {value(r['value']):>12}  {r['published']:>24}"
        lines.append(f"{head}  {r['verdict']:<7}  {r['source']}")
    return "\n".join(lines)


def draw(train: SparseDataset, name: str, path: Path) -> None:
    """Label (or word) frequency against rank, log-log, and the distribution of points per label."""
    plt = pyplot()
    counts = label_counts(train)
    ranked = np.sort(counts[counts > 0])[::-1]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.loglog(np.arange(1, len(ranked) + 1), ranked)
    a.set_xlabel("label rank")
    a.set_ylabel("training points")
    a.set_title(f"{name}: label frequency against rank")
    values, freq = np.unique(counts, return_counts=True)
    b.loglog(np.maximum(values, 0.5), freq / len(counts), "o", markersize=3)
    b.set_xlabel("training points per label (0 drawn at 0.5)")
    b.set_ylabel("share of labels")
    b.set_title("points per label")
    fig.tight_layout()
    save_figure(fig, path)


def write_json(path: Path, name: str, kind: str, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"dataset": name, "kind": kind, "rows": rows}, indent=1) + "\n")
    tmp.replace(path)
