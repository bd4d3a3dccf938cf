"""Free local ports for a dev server, reserved against other processes' picks.

Apart from the server process (``devserver.py``) because tests, benchmarks and the
command line pick ports too (``free_port``), and the TIME_WAIT trick that keeps two
parallel picks apart deserves one place.
"""

from __future__ import annotations

import contextlib
import socket

HOST = "127.0.0.1"


def _free_ports(count: int) -> list[int]:
    """Distinct free ports, each reserved for about a minute against other processes' picks.

    A port is free only until someone binds it: two processes that each bind port 0, close
    it and start a server (parallel test workers, the server binary picking its own
    internal ports the same way) can be handed the same port. So each port is left with a
    connection in TIME_WAIT on the listening side, closed by that side first: for as long
    as it lasts (60 s on Linux) the kernel gives the port to no other bind to port 0, while
    a server that binds it explicitly with SO_REUSEADDR, as the ``temporal`` binary does,
    gets it at once (the binary picks its own ports with the same trick).
    """
    # All sockets stay bound until every port is picked, so the ports are distinct.
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            # The TIME_WAIT connection inherits SO_REUSEADDR from this socket; without it,
            # even a SO_REUSEADDR bind would be refused while the reservation lasts.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((HOST, 0))
            sock.listen(1)
            port = int(sock.getsockname()[1])
            with socket.create_connection((HOST, port)):
                accepted, _ = sock.accept()
                accepted.close()  # this side first: the TIME_WAIT is on the picked port
            ports.append(port)
        return ports


def free_port() -> int:
    """A port nothing listens on right now, which no other bind to port 0 gets for about a
    minute; a server binding it with SO_REUSEADDR can (see ``_free_ports``)."""
    return _free_ports(1)[0]


def _port_in_use(port: int) -> bool:
    """True when something listens on ``port``.

    SO_REUSEADDR, as the ``temporal`` binary itself binds: without it, a port a
    stopped server left in TIME_WAIT looks busy for about a minute, although a
    restarted server could take it at once.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False
