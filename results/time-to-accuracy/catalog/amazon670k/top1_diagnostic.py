"""Diagnostic: are a run's wrong top-1 predictions neurons whose output row training never touched, or rare labels?

    python top1_diagnostic.py RUN_DIR DATASET [POINTS] > defaults-top1-diagnostic.json

On the first POINTS test and training points of DATASET, with the run's latest checkpoint (one rank): exact logits
over every output; for the top-1 predictions, whether their rows were ever updated (Adam's v nonzero), their labels'
training counts, and row norms. A one-off measurement for the README beside it, not part of the package."""

import json
import sys
from pathlib import Path

import numpy as np

from dslide.comm import Communicator
from dslide.data.registry import dataset_paths
from dslide.data.xc_format import load_dataset
from dslide.network import Batch, Network

run, dataset, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2000
train_p, test_p = dataset_paths(dataset, make=False)
train, test = load_dataset(train_p), load_dataset(test_p)
counts = np.bincount(train.label_indices, minlength=train.num_labels)
net, meta = Network.from_run(run, Communicator())
W, b = net.output.params.W, net.output.bias.b
v = net.output.params.v
touched = np.any(v != 0, axis=1)
out = {"step": int(meta["global_step"]), "rows_touched": float(touched.mean())}
norms = np.linalg.norm(W, axis=1)
for name, ds in (("test", test), ("train", train)):
    rows = np.arange(min(n, len(ds)))
    batch = Batch.from_dataset(ds, rows)
    _, full = net._hidden_forward(batch)
    h = full[-1]
    z = h @ W.T + b
    top = z.argmax(1)
    lab = [set(ds.label_indices[ds.label_indptr[i] : ds.label_indptr[i + 1]]) for i in rows]
    hit = np.array([t in s for t, s in zip(top, lab, strict=True)])
    true_logit = np.array([max(z[i, list(s)]) if s else np.nan for i, s in enumerate(lab)])
    out[name] = {
        "p@1": float(hit.mean()),
        "h_norm_median": float(np.median(np.linalg.norm(h, axis=1))),
        "top1_untouched_share": float((~touched[top]).mean()),
        "wrong_top1_untouched_share": float((~touched[top[~hit]]).mean()) if (~hit).any() else None,
        "wrong_top1_train_count_median": float(np.median(counts[top[~hit]])) if (~hit).any() else None,
        "hit_top1_train_count_median": float(np.median(counts[top[hit]])) if hit.any() else None,
        "wrong_top1_row_norm_median": float(np.median(norms[top[~hit]])) if (~hit).any() else None,
        "row_norm_median_all": float(np.median(norms)),
        "row_norm_median_untouched": float(np.median(norms[~touched])) if (~touched).any() else None,
        "top1_logit_median": float(np.median(z[rows, top])),
        "best_true_logit_median": float(np.nanmedian(true_logit)),
    }
print(json.dumps(out, indent=1))
