"""`harness data realism`: a dataset's statistics beside the published values of the set it stands for, with a
verdict each, and the figures (label frequency against rank, points per label). Statistics: dslide/data/realism.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dslide.data.dataset import SparseDataset
from dslide.data.realism import AMAZON_670K, TEXT8, is_skipgram, judge, label_counts, text_statistics, xc_statistics
from harness.report import pyplot, save_figure


def assess(train: SparseDataset, test: SparseDataset) -> tuple[str, list[dict]]:
    """('xc' or 'text', the judged rows)."""
    if is_skipgram(train):
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
