"""A lifeline for the test suite's long-lived helper processes.

``python lifeline.py COMMAND...`` runs COMMAND as its child, in its own
process group (the caller starts it with ``start_new_session=True``), and
watches its standard input: a pipe whose only writer is the test process.
When that pipe closes -- the test process ended, however it ended (a
SIGKILL of pytest, a CI job's timeout) -- the whole group gets SIGTERM
(dask's commands close cleanly on it) and, after ``GRACE`` seconds,
SIGKILL: nothing of a killed test run keeps a scheduler, a worker or a
port.  SIGTERM and SIGINT sent to the lifeline go to COMMAND; the lifeline
exits with COMMAND's status.  (Where there are no process groups, the
lifeline ends COMMAND and what psutil finds it started.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

#: Seconds between SIGTERM and SIGKILL once the test process is gone.
GRACE = 10.0


def _end_everything(child: subprocess.Popen) -> None:
    if hasattr(os, "killpg"):
        os.killpg(0, signal.SIGTERM)  # (this process forwards it: handled)
        try:
            child.wait(GRACE)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(0, signal.SIGKILL)  # (this process too: the group's last act)
        return
    import psutil

    tree = psutil.Process(child.pid).children(recursive=True) + [psutil.Process(child.pid)]
    for p in tree:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(tree, timeout=GRACE)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass


def main(argv: list) -> int:
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    cut = threading.Event()

    def watch() -> None:
        while sys.stdin.buffer.read(4096):  # (EOF: the test process is gone)
            pass
        cut.set()
        _end_everything(child)
        os._exit(1)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()
    status = child.wait()
    if cut.is_set():  # (the watcher ends this process once all is gone)
        threading.Event().wait(2 * GRACE)
        os._exit(1)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
