"""The shared process pools ``multiprocessing.get`` keeps (issue #35): a
script sweeping ``num_workers``, or passing a fresh
``functools.partial`` initializer per call, must not pile up idle pools
and their workers for the life of the process (dask's own
``multiprocessing.get`` keeps none: it closes its pool after each call)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = """
import functools, time
import psutil
from localsched import multiprocessing as lmp

def setup(config):
    pass

dsk = {"x": (sum, [1, 2])}
for n in (1, 2, 3, 4):  # a sweep over num_workers
    assert lmp.get(dsk, "x", num_workers=n) == 3
for config in range(3):  # an initializer made per call
    assert lmp.get(dsk, "x", num_workers=2, initializer=functools.partial(setup, config)) == 3
me = psutil.Process()
deadline = time.monotonic() + 60
while len(me.children()) > 4 and time.monotonic() < deadline:
    time.sleep(0.05)  # (idle pools reaped: their workers exit)
print(len(me.children()), flush=True)
"""


def test_idle_shared_pools_do_not_pile_up():
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT)], capture_output=True,
                         text=True, timeout=240, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    # the last two pools' workers at most (KEEP_POOLS), not 1+2+3+4+2+2+2
    assert int(out.stdout.split()[-1]) <= 4, out.stdout
