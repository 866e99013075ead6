"""The cost model fitted on a profile's records (compute per step, measured link efficiencies), checked leave-one-out
on the measured multi-node points, and its predictions of epochs and speedups."""

from __future__ import annotations

import dataclasses

from harness.report import costmodel
from harness.report.costmodel import AMAZON_670K, ClusterShape
from harness.report.measured import Measured, has_fixed_shape, model_shape, select


@dataclasses.dataclass
class Model:
    calibrations: dict[str, costmodel.Calibration]
    validations: list[tuple[str, costmodel.Validation]]  # (experiment, check)
    efficiencies: costmodel.Efficiencies  # measured by the `links` payload points (empty: LINK_EFFICIENCY)


def fit_model(measured: list[Measured]) -> Model:
    """Fit on the 1-core-per-node runs of the Amazon-670K shape (hidden 128, batch 128); validate leave-one-out.

    Compute is assumed to scale linearly with the cores of a node (runs with 2 cores per node are left out of the
    fit so they do not mix thread scaling into the serial/parallel split)."""
    usable = [m for m in measured if m.point.arm in ("dslide", "horovod") and m.point.cores_per_node == 1]
    usable = [m for m in usable if has_fixed_shape(m.point.dataset) and model_shape(m.point) == AMAZON_670K]
    calibrations = {}
    for system in ("dslide", "horovod"):
        records = [r for m in usable if m.point.system == system for r in m.records]
        cal = costmodel.calibrate(system, AMAZON_670K, records)
        if cal:
            calibrations[system] = cal
    experiment_of = {r.get("run_id"): m.point.experiment for m in usable for r in m.records}
    efficiencies = costmodel.measured_efficiencies(r for m in select(measured, "links") for r in m.records)
    checks = []
    for system in calibrations:
        records = [r for m in usable if m.point.system == system for r in m.records]
        checks += [(experiment_of.get(c.run_id, "?"), c)
                   for c in costmodel.validate(system, AMAZON_670K, records, efficiencies)]  # fmt: skip
    return Model(calibrations, checks, efficiencies)


def predict_epoch(model: Model, system: str, cluster: ClusterShape, points: int) -> float | None:
    cal = model.calibrations.get(system)
    if not cal:
        return None
    return costmodel.predict(
        cal, cluster, costmodel.steps_per_epoch(points, cal.shape.batch), model.efficiencies
    ).epoch_s


def predicted_speedup(model: Model, cluster: ClusterShape) -> float:
    h = costmodel.predict(model.calibrations["horovod"], cluster, 1, model.efficiencies).step_s
    return h / costmodel.predict(model.calibrations["dslide"], cluster, 1, model.efficiencies).step_s
