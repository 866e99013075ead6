"""Daemons the root tests run for real (sshd, munged, slurmctld, slurmd), from Debian packages."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def installed(program: str, package: str) -> str:
    """The path of a daemon from a Debian package, installing the package if missing (the test skips if apt cannot)."""
    found = shutil.which(program) or f"/usr/sbin/{program}"
    if Path(found).exists():
        return found
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    install = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", package], capture_output=True,
                             text=True, env=env)  # fmt: skip
    if install.returncode != 0 or not Path(f"/usr/sbin/{program}").exists():
        pytest.skip(f"no {program} and apt-get could not install {package}: {install.stderr.strip()[-300:]}")
    return f"/usr/sbin/{program}"
