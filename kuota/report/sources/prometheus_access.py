"""How ``kuota report`` proves who it is to a managed or multi-tenant Prometheus, Thanos or Mimir.

The "Prometheus access" flags, checked before the first query: a bearer token (the token itself, or a file
re-read whenever it changes, as a projected service-account token rotates under a CronJob), basic auth with
the password in a file (re-read the same way), extra headers (``X-Scope-OrgID`` for a Mimir or Cortex
tenant), and TLS: a CA, a client certificate and key, a server name, or no verification at all.

The token and the password never enter a message or a repr: messages name the flag and the file instead,
and :meth:`PrometheusAccess.redact` takes them out of any text a server sends back.
"""

from __future__ import annotations

import base64
import re
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kuota.report.errors import ReportInputError

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# Headers that frame the request: aiohttp sets them, and another value would break the query.
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "content-type", "content-encoding", "transfer-encoding", "connection", "upgrade"}
)
TLS_FLAGS = (
    "--prometheus-ca-file",
    "--prometheus-cert-file",
    "--prometheus-key-file",
    "--prometheus-insecure-skip-verify",
    "--prometheus-server-name",
)


def _one_token(text: str) -> bool:
    """A bearer token is printable ASCII without spaces (a JWT, an opaque key)."""
    return bool(text) and text.isascii() and text.isprintable() and not any(ch.isspace() for ch in text)


class _SecretFile:
    """A secret kept in a file, read again whenever the file's identity, size or mtime changes.

    The first read must give an ``acceptable`` secret. Later, an unreadable, empty or unacceptable file (a
    rotation caught half-written) keeps the previous secret, and the next request reads it again.
    """

    def __init__(self, path: Path, flag: str, what: str, acceptable: Callable[[str], bool] = bool) -> None:
        self._path = path
        self._acceptable = acceptable
        self._seen: tuple[int, int, int, int] | None = None
        try:
            secret = self._read()
        except OSError as error:
            raise ReportInputError(
                f"{flag} {path} cannot be read ({error.strerror or error}); give a file holding the {what}"
            ) from error
        except UnicodeDecodeError as error:
            raise ReportInputError(f"{flag} {path} is not UTF-8 text; give a file holding the {what}") from error
        if secret is None:
            raise ReportInputError(f"{flag} {path} does not hold one {what} (it is empty or more than one line)")
        self._secret = secret

    def _read(self) -> str | None:
        facts = self._path.stat()
        signature = (facts.st_dev, facts.st_ino, facts.st_mtime_ns, facts.st_size)
        if signature == self._seen:
            return self._secret
        secret = self._path.read_text(encoding="utf-8").strip()
        if not secret or not self._acceptable(secret):
            return None
        self._seen = signature
        return secret

    def current(self) -> str:
        try:
            secret = self._read()
        except (OSError, UnicodeDecodeError):
            return self._secret
        if secret is not None:
            self._secret = secret
        return self._secret


class _Authorization(Protocol):
    described: str

    def header(self) -> str: ...

    def secrets(self) -> list[str]: ...


class _LiteralToken:
    def __init__(self, token: str) -> None:
        if not _one_token(token):
            raise ReportInputError("--prometheus-bearer-token is not one token (printable ASCII without spaces)")
        self._token = token
        self.described = "the bearer token of --prometheus-bearer-token"

    def header(self) -> str:
        return f"Bearer {self._token}"

    def secrets(self) -> list[str]:
        return [self._token]


class _TokenFile:
    def __init__(self, path: Path) -> None:
        self._file = _SecretFile(path, "--prometheus-bearer-token-file", "bearer token", _one_token)
        self.described = f"the bearer token of --prometheus-bearer-token-file {path}"

    def header(self) -> str:
        return f"Bearer {self._file.current()}"

    def secrets(self) -> list[str]:
        return [self._file.current()]


class _BasicAuth:
    def __init__(self, username: str, password_file: Path) -> None:
        if not username or ":" in username or _CONTROL.search(username):
            raise ReportInputError(
                "--prometheus-basic-auth takes a user name without ':' or control characters; check it"
            )
        self._username = username
        self._password = _SecretFile(password_file, "--prometheus-password-file", "password")
        self.described = (
            f"basic auth as user {username!r} with the password of --prometheus-password-file {password_file}"
        )

    def _encoded(self) -> str:
        return base64.b64encode(f"{self._username}:{self._password.current()}".encode()).decode("ascii")

    def header(self) -> str:
        return f"Basic {self._encoded()}"

    def secrets(self) -> list[str]:
        return [self._password.current(), self._encoded()]


def parse_header(text: str, position: int) -> tuple[str, str]:
    """One ``--prometheus-header 'Name: value'``; messages name the header, never its value."""
    name, colon, value = text.strip().partition(":")
    value = value.strip(" \t")
    flag = f"--prometheus-header number {position}"
    if not colon or not _HEADER_NAME.fullmatch(name):
        raise ReportInputError(f"{flag} is not 'Name: value' with a header name such as X-Scope-OrgID; fix it")
    if not value or _CONTROL.search(value):
        raise ReportInputError(f"--prometheus-header {name} has no value, or control characters in it; fix it")
    if name.lower() in RESERVED_HEADERS:
        raise ReportInputError(f"--prometheus-header {name} frames the request and is set by kuota; leave it out")
    return name, value


@dataclass(frozen=True)
class PrometheusAccess:
    """The headers and TLS settings of every request to ``--prometheus``; the default is none at all."""

    headers: Mapping[str, str] = field(default_factory=dict)  # the --prometheus-header ones
    authorization: _Authorization | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)  # set for https (system CAs by default)
    server_name: str | None = None  # expected in the server's certificate, instead of the URL's host

    def request_headers(self) -> dict[str, str]:
        """This request's headers, with the token or password as the file holds it now."""
        if self.authorization is None:
            return dict(self.headers)
        return {**self.headers, "Authorization": self.authorization.header()}

    @property
    def described(self) -> str:
        """What was presented, for a refusal: the flags and files, never a secret."""
        what = self.authorization.described if self.authorization is not None else "no credentials"
        if self.headers:
            what += f", with header(s) {', '.join(self.headers)}"
        return what

    def redact(self, text: str) -> str:
        """``text`` (a server's answer) with any secret in use replaced by ``[redacted]``."""
        for secret in self.authorization.secrets() if self.authorization is not None else []:
            text = text.replace(secret, "[redacted]")
        return text


def _tls_context(
    ca_file: Path | None, cert_file: Path | None, key_file: Path | None, insecure_skip_verify: bool
) -> ssl.SSLContext:
    if (cert_file is None) != (key_file is None):
        raise ReportInputError("--prometheus-cert-file and --prometheus-key-file go together: give both or neither")
    if insecure_skip_verify and ca_file is not None:
        raise ReportInputError(
            "--prometheus-insecure-skip-verify verifies nothing, so --prometheus-ca-file would be ignored: give one"
        )
    try:
        context = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    except (OSError, ssl.SSLError) as error:
        raise ReportInputError(
            f"--prometheus-ca-file {ca_file} does not load ({error}); give the PEM file of the CA that signed "
            "Prometheus' certificate"
        ) from error
    if cert_file is not None and key_file is not None:
        try:
            # a key with a passphrase fails here instead of prompting on the terminal
            context.load_cert_chain(str(cert_file), str(key_file), password="")
        except (OSError, ssl.SSLError) as error:
            raise ReportInputError(
                f"--prometheus-cert-file {cert_file} and --prometheus-key-file {key_file} do not load ({error}); "
                "give a PEM certificate and its unencrypted PEM key"
            ) from error
    if insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def prometheus_access(
    url: str,
    *,
    bearer_token: str | None = None,
    bearer_token_file: Path | None = None,
    basic_auth: str | None = None,
    password_file: Path | None = None,
    headers: Sequence[str] = (),
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    insecure_skip_verify: bool = False,
    server_name: str | None = None,
) -> PrometheusAccess:
    """The access the "Prometheus access" flags give for ``url`` (from ``prometheus_url``), checked whole."""
    authorizing = {
        "--prometheus-bearer-token": bearer_token,
        "--prometheus-bearer-token-file": bearer_token_file,
        "--prometheus-basic-auth": basic_auth,
    }
    given = [flag for flag, value in authorizing.items() if value is not None]
    if len(given) > 1:
        raise ReportInputError(f"{' and '.join(given)} both set the Authorization header: give one")
    if (basic_auth is None) != (password_file is None):
        raise ReportInputError(
            "--prometheus-basic-auth USER and --prometheus-password-file FILE go together: give both"
        )
    authorization: _Authorization | None = None
    if basic_auth is not None and password_file is not None:
        authorization = _BasicAuth(basic_auth, password_file)
    elif bearer_token_file is not None:
        authorization = _TokenFile(bearer_token_file)
    elif bearer_token is not None:
        authorization = _LiteralToken(bearer_token.strip())
    parsed: dict[str, str] = {}
    for position, text in enumerate(headers, start=1):
        name, value = parse_header(text, position)
        if any(name.lower() == known.lower() for known in parsed):
            raise ReportInputError(f"--prometheus-header {name} is given twice: give it once")
        if name.lower() == "authorization" and authorization is not None:
            raise ReportInputError(
                f"--prometheus-header Authorization and {given[0]} both set the Authorization header: give one"
            )
        parsed[name] = value
    tls = dict(zip(TLS_FLAGS, (ca_file, cert_file, key_file, insecure_skip_verify or None, server_name), strict=True))
    tls_given = [flag for flag, value in tls.items() if value is not None]
    if not url.startswith("https://"):
        if tls_given:
            raise ReportInputError(f"{tls_given[0]} applies to https only: give --prometheus an https:// URL")
        return PrometheusAccess(parsed, authorization)
    if server_name is not None and not server_name.strip():
        raise ReportInputError("--prometheus-server-name is empty: give the name in Prometheus' certificate")
    context = _tls_context(ca_file, cert_file, key_file, insecure_skip_verify)
    return PrometheusAccess(parsed, authorization, context, server_name.strip() if server_name else None)
