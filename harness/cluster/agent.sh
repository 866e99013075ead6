#!/bin/sh
# mpiexec's -launcher-exec: Hydra runs this in place of ssh. The harness sets DSLIDE_HARNESS_PYTHON to its
# own interpreter so the agent runs from the same environment as mpiexec.
exec "${DSLIDE_HARNESS_PYTHON:-python3}" -m harness.cluster.agent "$@"
