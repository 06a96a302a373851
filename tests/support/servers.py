"""What a dashboard test checks of the server it leaves behind."""

import errno
import socket


def port_is_free(host: str, port: int) -> bool:
    """Nothing of this process listens on ``port``, and a server could bind it
    (with SO_REUSEADDR, as servers do: closed connections may linger in TIME_WAIT)."""
    import psutil

    listening = [c for c in psutil.Process().net_connections("inet")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    if listening:
        return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            assert exc.errno == errno.EADDRINUSE
            return False
        return True
