"""One measured run: a system started under mpiexec on a cluster, and its record.

spec     what one run is (system, cluster, data, limits), checked before anything runs
runner   cluster up -> launch the system -> link counters -> one record appended (also for failed runs)
record   a finished run as a record: the system's metrics, the link counters, what went wrong; the figures
         read back from a record (training steps, link bytes per training step, whole-epoch time)
store    the records files (results/runs/<name>.jsonl): the schema, atomic appends, reading; which machine
         and commit made a record
"""
