"""A TCP relay from one address to another, bytes copied both ways (TLS passes through untouched).

The test API server listens on 127.0.0.1 only; a container in its own network namespace reaches it through a
relay on the host's address, as a pod reaches the API server through the ``kubernetes`` Service.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class TcpRelay:
    def __init__(self, listen_host: str, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server((listen_host, 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._accepting = threading.Thread(target=self._accept, name="tcp-relay", daemon=True)

    def __enter__(self) -> TcpRelay:
        self._accepting.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        self._listener.close()
        self._accepting.join(timeout=5)
        with self._lock:
            for connection in self._open:
                connection.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _peer = self._listener.accept()
            except OSError:  # the listener was closed
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copies until either side closes, then closes the other's writing half so it sees the end too."""
    with contextlib.suppress(OSError):  # either side closed
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
