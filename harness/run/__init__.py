"""One measured run: a system started under mpiexec on a cluster, and its record.

runner   cluster up -> launch the system -> link counters -> one record appended (also for failed runs)
record   a finished run as a record: the system's metrics, the link counters, what went wrong
store    the records files (results/runs/<name>.jsonl): the schema, atomic appends, reading; which machine
         and commit made a record
"""
