"""Windows' process capabilities, simulated on Linux: ``_platform`` answers
as Windows would (no pipe descriptors passed by number nor waited on, no
PDEATHSIG, no pidfd, no shared memory, 63 handles per wait), so the process pool takes the path
it takes on Windows (``localsched/_pool/workers.py``: ``_MPWorker``,
portable).  Workers spawned meanwhile inherit the environment variable and
answer the same."""

from __future__ import annotations

import os
import subprocess

ENV = {"LOCALSCHED_SIMULATE_WINDOWS": "1"}


class _PopenWithoutPassFds(subprocess.Popen):
    def __init__(self, *args, pass_fds=(), **kwargs):
        if pass_fds:
            raise ValueError("pass_fds is not supported on Windows.")
        super().__init__(*args, **kwargs)


def simulate_windows(monkeypatch) -> None:
    from localsched import _platform
    from localsched import multiprocessing as lmp
    from localsched._pool import segments

    lmp.shutdown()  # (a pool started natively must not serve the simulation)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_platform, "SIMULATE_WINDOWS", True, raising=False)
    monkeypatch.setattr(_platform, "FD_PASSING", False, raising=False)
    monkeypatch.setattr(_platform, "WAIT_LIMIT", 63, raising=False)
    # What subprocess says on Windows when asked to pass descriptors.
    monkeypatch.setattr(subprocess, "Popen", _PopenWithoutPassFds)
    # Its one warning (no shared memory) is tested in tests/test_platforms.py.
    monkeypatch.setattr(segments, "_warned", True)


def my_segments() -> dict:
    """This process's localsched segments now (none where there is no /dev/shm)."""
    from localsched._pool import shm

    return shm.live_segments(pids=[os.getpid()])
