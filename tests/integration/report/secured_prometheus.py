"""What stands between the report and a managed Prometheus, built for real: a test CA with a serving and a
client certificate, bcrypt hashes for Prometheus' ``basic_auth_users``, and a tenant gateway.

The bcrypt hash comes from the system's libcrypt (libxcrypt, through ctypes): the venv has no ``bcrypt``
module and none is added for one test. The gateway is a small aiohttp reverse proxy on its own event loop in
a thread, as Mimir's or Cortex's gateway stands in front of their queriers: it lets a query through only with
the bearer token it accepts now and an ``X-Scope-OrgID`` header, and records the tokens it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kuota.certs.authority import ServingIdentity, issue_bundle


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_context(self, *, with_certificate: bool) -> ssl.SSLContext:
        """What the harness presents: trusts the CA, and (``with_certificate``) shows the client certificate."""
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        if with_certificate:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def issue_tls_files(folder: Path) -> TlsFiles:
    """kuota's own CA code issues the CA and Prometheus' serving pair (127.0.0.1); the client certificate
    (clientAuth, which Prometheus' verifier requires) is signed here with that CA's key."""
    now = datetime.now(UTC)
    bundle = issue_bundle(ServingIdentity(dns_names=("localhost",), ip_addresses=("127.0.0.1",)), now)
    ca_certificate = x509.load_pem_x509_certificate(bundle.ca_cert_pem)
    ca_key = serialization.load_pem_private_key(bundle.ca_key_pem, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kuota-report")]))
        .issuer_name(ca_certificate.subject)
        .public_key(client_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(
        folder / "ca.crt", folder / "server.crt", folder / "server.key", folder / "client.crt", folder / "client.key"
    )
    files.ca_cert.write_bytes(bundle.ca_cert_pem)
    files.server_cert.write_bytes(bundle.cert_pem)
    files.server_key.write_bytes(bundle.key_pem)
    files.client_cert.write_bytes(client_certificate.public_bytes(serialization.Encoding.PEM))
    files.client_key.write_bytes(_pem_key(client_key))
    return files


def bcrypt_hash(password: str) -> str:
    """A bcrypt hash of ``password`` at the lowest cost (4), as Prometheus' ``basic_auth_users`` takes it."""
    library = ctypes.util.find_library("crypt")
    assert library is not None, "libcrypt (libxcrypt) is part of every Debian system"
    libcrypt = ctypes.CDLL(library)
    libcrypt.crypt_gensalt.restype = ctypes.c_char_p
    libcrypt.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    libcrypt.crypt.restype = ctypes.c_char_p
    libcrypt.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    setting = libcrypt.crypt_gensalt(b"$2b$", 4, None, 0)
    hashed: bytes | None = libcrypt.crypt(password.encode(), setting) if setting else None
    assert hashed and hashed.startswith(b"$2b$04$"), f"libcrypt gave no bcrypt hash: {hashed!r}"
    return hashed.decode("ascii")


@dataclass
class TenantGateway:
    """Set ``accepted_token`` to rotate what it lets through; ``tokens_seen`` lists every token presented."""

    backend: str
    tenant: str
    accepted_token: str
    url: str = ""
    tokens_seen: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self) -> list[str]:
        with self._lock:
            return list(self.tokens_seen)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        with self._lock:
            self.tokens_seen.append(token)
            accepted = self.accepted_token
        if scheme != "Bearer" or token != accepted:
            return web.Response(status=401, text="authentication failed\n")
        if request.headers.get("X-Scope-OrgID") != self.tenant:
            return web.Response(status=401, text="no org id\n")
        body = await request.read()
        headers = {"Content-Type": request.headers.get("Content-Type", "application/x-www-form-urlencoded")}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{self.backend}{request.path}", data=body, headers=headers) as answer,
        ):
            return web.Response(status=answer.status, body=await answer.read(), content_type="application/json")


@contextlib.contextmanager
def tenant_gateway(backend: str, tenant: str, token: str) -> Iterator[TenantGateway]:
    """A :class:`TenantGateway` on 127.0.0.1 in front of the Prometheus at ``backend``."""
    gateway = TenantGateway(backend, tenant, token)
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/api/v1/{endpoint}", gateway._handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    gateway.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield gateway
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
