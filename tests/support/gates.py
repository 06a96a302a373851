"""A one-shot signal between a test and a task in a worker process, on
every platform (a named pipe, ``os.mkfifo``, is POSIX only).

A ``Gate`` listens on 127.0.0.1; its ``address`` travels to the task
(a tuple pickles anywhere).  Either side may be the one that waits:

- the task tells the test it got somewhere: ``notify(address)`` in the
  task, ``gate.wait()`` in the test (returns once the task has notified);
- the test lets the task go on: ``wait_for(address)`` in the task (blocks
  until the test opens the gate), ``gate.open()`` in the test (returns once
  the task is waiting, as a named pipe's writer returns once the reader
  is there).

Every wait has a timeout (a test that went wrong fails, never hangs), and
the listening socket is closed with the ``with`` block.
"""

from __future__ import annotations

import socket

__all__ = ["Gate", "notify", "wait_for"]

#: Seconds either side waits for the other before giving up.
TIMEOUT = 60.0


class Gate:
    def __init__(self, timeout: float = TIMEOUT):
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(timeout)
        self.address = self._server.getsockname()[:2]

    def wait(self) -> None:
        """Return once a task has called ``notify(self.address)``."""
        conn, _ = self._server.accept()
        with conn:
            conn.settimeout(self._server.gettimeout())
            if conn.recv(1) != b"x":
                raise ConnectionError("the task closed the gate without notifying")

    def open(self) -> None:
        """Let the task waiting in ``wait_for(self.address)`` go on (once it waits)."""
        conn, _ = self._server.accept()
        with conn:
            conn.sendall(b"x")

    def close(self) -> None:
        self._server.close()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def notify(address) -> None:
    """(In the task) tell the test waiting on the gate at ``address``."""
    with socket.create_connection(tuple(address), timeout=TIMEOUT) as s:
        s.sendall(b"x")


def wait_for(address, timeout: float = 2 * TIMEOUT) -> None:
    """(In the task) wait until the test opens the gate at ``address``."""
    with socket.create_connection(tuple(address), timeout=timeout) as s:
        if s.recv(1) != b"x":
            raise ConnectionError("the gate was closed, not opened")
