"""Diagnostic: how much of a run's lean on popular labels is in its output biases?

    python bias_diagnostic.py RUN_DIR DATASET [POINTS] > dense-bias-diagnostic.json

On the first POINTS test points of DATASET (default 5,000), with the run's latest checkpoint (one rank): exact top-5
over every output, scored three ways: with the biases as trained, with the initial log-prior taken out of them
(dslide/init.py, `--output-bias prior`), and with no biases. For each: P@1 and the input-specificity statistics of
`harness data realism --run`. A one-off measurement for the README beside it, not part of the package."""

import json
import sys
from pathlib import Path

import numpy as np

from dslide.comm import Communicator
from dslide.data.registry import dataset_paths
from dslide.data.xc_format import load_dataset
from dslide.init import output_bias_prior
from dslide.network import Batch, Network
from harness.study.ceiling import hits
from harness.study.realism import label_counts, model_statistics

run, dataset, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5000
train_path, test_path = dataset_paths(dataset)
train, test = load_dataset(train_path), load_dataset(test_path)
test = test.subset(np.arange(min(n, len(test))))
net, _ = Network.from_run(run, Communicator())
bias = net.output.bias.b
trained = bias.copy()
prior = output_bias_prior(label_counts(train), net.output.owned)


def top5() -> np.ndarray:
    rows = np.arange(len(test))
    return np.concatenate([net.predict_topk(Batch.from_dataset(test, rows[i : i + 1000]), 5)
                           for i in range(0, len(test), 1000)])  # fmt: skip


out = {
    "run": str(run), "dataset": dataset, "test_points": len(test),
    "bias_trained_mean": float(trained.mean()), "bias_trained_sd": float(trained.std()),
    "prior_mean": float(prior.mean()), "prior_sd": float(prior.std()),
    "corr_trained_prior": float(np.corrcoef(trained, prior)[0, 1]),
}  # fmt: skip
for name, value in (("as_trained", trained), ("minus_prior", trained - prior), ("zero", np.zeros_like(trained))):
    bias[...] = value
    top = top5()
    out[name] = {"p@1": float(hits(test, top[:, 0]).mean()), **model_statistics(train, test, top)}
json.dump(out, sys.stdout, indent=1)
print()
