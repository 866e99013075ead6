"""`harness report`: REPORT.md and its figures from the recorded runs, every number beside how it was obtained.

document         the report: one section per machine and profile, the first screen, write_report
claims           the paper's claims beside what the records show
sections         one section per experiment, the cost model's, where the emulation differs from the paper
figures          epoch time, speedup, bytes per step, accuracy over time, the cost model at the paper's shape
equal_accuracy   time to a target P@1 for D-SLIDE and Horovod: the speedups at equal accuracy
epoch_ratios     RQ3's per-epoch ratios (Horovod's epoch time over D-SLIDE's)
model_fit        the cost model fitted on the records and checked leave-one-out
costmodel        the analytic cost model of an epoch (compute per step, bytes per step, link rate)
popularity       what always predicting the commonest labels scores
measured         the planned points with their records, one machine's only
formatting       numbers, tables and a point's cluster as the report writes them
"""
