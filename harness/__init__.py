"""The experiment around dslide: emulated or real clusters, measured runs, studies, the report, the benchmarks.

Layers, each importing only those below it: cli (cli.py, cli_cluster.py, cli_data.py) -> report/ -> study/ and
bench/ -> run/ -> cluster/. payload.py is the MPI self-test the runs can launch; plotting.py draws figures to files.
"""
