"""Windows' process capabilities, simulated on Linux: ``_platform`` answers
as Windows would (no pipe descriptors passed by number nor waited on, no
PDEATHSIG, no pidfd, 63 handles per wait, named mappings for shared
memory), so the process pool takes the path it takes on Windows
(``localsched/_pool/workers.py``: ``_MPWorker``, portable) and its
segments follow Windows' rules (``localsched/_shm/named_mappings.py``:
``SimulatedNamedMappings``).  Workers spawned meanwhile inherit the
environment variable and answer the same.  ``end_simulation()`` (from
tests/macos_sim.py) closes the simulation's store."""

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
    from localsched._shm import kind_in_use
    from localsched._shm import store as segments

    lmp.shutdown()  # (a pool started natively must not serve the simulation)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_platform, "SIMULATE_WINDOWS", True, raising=False)
    monkeypatch.setattr(_platform, "FD_PASSING", False, raising=False)
    monkeypatch.setattr(_platform, "WAIT_LIMIT", 63, raising=False)
    # What subprocess says on Windows when asked to pass descriptors.
    monkeypatch.setattr(subprocess, "Popen", _PopenWithoutPassFds)
    # Shared memory: Windows' named mappings, simulated (``named_mappings``),
    # in a store of the simulation's own.
    monkeypatch.setattr(kind_in_use, "_kind", [])
    monkeypatch.setattr(segments, "_store", None)
    monkeypatch.setattr(segments, "_swept_in", 0)


def my_segments() -> dict:
    """This process's localsched segments now, as the store sees them and
    as /dev/shm shows them (none where there is no /dev/shm)."""
    from localsched._shm import transport as shm
    from tests.macos_sim import objects_of

    found = dict(shm.live_segments(pids=[os.getpid()]))
    found.update(dict.fromkeys(objects_of(os.getpid()), -1))
    return found
