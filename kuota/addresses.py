"""The one HOST:PORT parser of every ``--*-listen`` flag: ``:9443`` (every interface), ``127.0.0.1:9443``,
``localhost:9443`` and ``[::1]:9443`` (an IPv6 host goes in brackets, as in a URL)."""

from __future__ import annotations

from kuota.errors import KuotaError

ANY_INTERFACE = "0.0.0.0"


class AddressError(KuotaError, ValueError):
    """A text is not HOST:PORT; the message quotes it and shows the accepted forms."""


def parse_host_port(text: str) -> tuple[str, int]:
    """(host, port) of ``text``; an empty host is every interface."""
    host, colon, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        host = ""  # an IPv6 host without brackets: its colons make the port ambiguous
        colon = ""
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535 or any(c in host for c in "[]/ "):
        raise AddressError(f"{text!r} is not HOST:PORT: write :9443, 0.0.0.0:9443, localhost:9443 or [::1]:9443")
    return host or ANY_INTERFACE, int(port)
