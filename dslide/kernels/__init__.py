"""numba kernels only: no I/O, no MPI, no Python objects. The layers and the network call these."""
