"""The webhook's server-side :class:`ssl.SSLContext`, reloadable in place.

``SSLContext.load_cert_chain`` on a live context changes the certificate offered to every later handshake,
so a renewal never restarts the listener and never drops connections already open.
"""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path

from kuota.certs.authority import verify_serving_pair
from kuota.certs.errors import CertificateMaterialError
from kuota.files import PRIVATE_FILE_MODE, write_file


class ReloadableServerContext:
    """One TLS 1.2+ server context; ``loaded`` turns true with the first certificate and stays true."""

    def __init__(self) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.options |= ssl.OP_NO_COMPRESSION
        self.loaded = False
        self.cert_pem = b""

    def load(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Serve ``cert_pem``/``key_pem`` from the next handshake on.

        The pair is checked first so that a bad renewal leaves the previous certificate in service.
        """
        verify_serving_pair(cert_pem, key_pem)
        # load_cert_chain reads only from files; a private directory keeps the key out of reach of others.
        with tempfile.TemporaryDirectory(prefix="kuota-tls-") as directory:
            cert_path = Path(directory) / "tls.crt"
            key_path = Path(directory) / "tls.key"
            write_file(cert_path, cert_pem)
            write_file(key_path, key_pem, mode=PRIVATE_FILE_MODE)
            try:
                self.context.load_cert_chain(cert_path, key_path)
            except ssl.SSLError as error:
                raise CertificateMaterialError(f"the TLS library refused the serving pair: {error}") from error
        self.cert_pem = cert_pem
        self.loaded = True
