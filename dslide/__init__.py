"""dslide: Distributed SLIDE — LSH-sampled sparse training, one node or many (MPI model parallelism)."""

__version__ = "0.1.0"
