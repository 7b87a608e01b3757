"""The manager's TLS connections read into 64 KiB buffers instead of asyncio's 256 KiB, and still carry bodies
of any size: a real TLS server and client on the loopback, a megabyte each way."""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from datetime import UTC, datetime

import pytest

from kuota.certs.authority import ServingIdentity, issue_bundle
from kuota.certs.serving_context import ReloadableServerContext
from kuota.tls_buffers import TLS_READ_BUFFER_BYTES, shrink_tls_read_buffers

BODY = bytes(range(256)) * 4096  # 1 MiB


async def test_connections_opened_after_the_shrink_read_tls_into_small_buffers_and_carry_big_bodies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # asyncio's own default, whatever an earlier test in this process did; restored after the test.
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", 256 * 1024)
    shrink_tls_read_buffers()
    assert sslproto.SSLProtocol.max_size == TLS_READ_BUFFER_BYTES
    bundle = issue_bundle(ServingIdentity(dns_names=("localhost",), ip_addresses=("127.0.0.1",)), datetime.now(UTC))
    server_context = ReloadableServerContext()
    server_context.load(bundle.cert_pem, bundle.key_pem)
    client_context = ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())
    buffers: list[int] = []

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        protocol = getattr(writer.transport, "_ssl_protocol", None)  # the TLS layer under the stream's transport
        buffers.append(len(getattr(protocol, "_ssl_buffer", b"")))
        writer.write(await reader.readexactly(len(BODY)))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=server_context.context)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_context, server_hostname="localhost"
        )
        writer.write(BODY)
        await writer.drain()
        assert await reader.readexactly(len(BODY)) == BODY
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
    assert buffers == [TLS_READ_BUFFER_BYTES]


def test_shrinking_twice_or_below_a_smaller_default_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", 16 * 1024)
    shrink_tls_read_buffers()
    assert sslproto.SSLProtocol.max_size == 16 * 1024
