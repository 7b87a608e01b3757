"""Smaller read buffers for asyncio's TLS connections.

asyncio's ``SSLProtocol`` gives every TLS connection a 256 KiB read buffer, zero-filled and so resident, for as
long as the connection lives. The API server keeps an idle connection to the webhook for every review it had in
flight at once (for 90 s), and the manager's own client pools hold more: a hundred connections hold 25 MiB of
buffers that mostly hold nothing. 64 KiB still reads four full TLS records (16 KiB each) at a time.
"""

from __future__ import annotations

from asyncio import sslproto

TLS_READ_BUFFER_BYTES = 64 * 1024


def shrink_tls_read_buffers() -> None:
    """Make the connections opened from now on read TLS into :data:`TLS_READ_BUFFER_BYTES` buffers."""
    if getattr(sslproto.SSLProtocol, "max_size", 0) > TLS_READ_BUFFER_BYTES:
        sslproto.SSLProtocol.max_size = TLS_READ_BUFFER_BYTES
