"""The "Prometheus access" flags: headers built as given, files re-read when they change, every bad flag one
line naming it, and no secret in any message or repr."""

from __future__ import annotations

import argparse
import base64
import os
from pathlib import Path

import pytest

from kuota.cli import build_parser
from kuota.report.errors import ReportInputError
from kuota.report.sources.prometheus_access import parse_header, prometheus_access
from kuota.report.sources.prometheus_api import prometheus_url
from tests.unit.report.conftest import run_report, serving

URL = "http://prometheus:9090"
TOKEN = "eyJhbGciOi.secret-token.sig"
PASSWORD = "p4ss word"


def _file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _refused(**flags: object) -> str:
    url = str(flags.pop("url", URL))
    with pytest.raises(ReportInputError) as refused:
        prometheus_access(url, **flags)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "\n" not in message and TOKEN not in message and PASSWORD not in message
    return message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("X-Scope-OrgID: team-a", ("X-Scope-OrgID", "team-a")),
        ("X-Scope-OrgID:team-a|team-b", ("X-Scope-OrgID", "team-a|team-b")),
        ("  X-Api-Key :  k ", None),  # a space before the colon is not a header name
    ],
)
def test_a_header_is_name_colon_value(text: str, expected: tuple[str, str] | None) -> None:
    if expected is None:
        with pytest.raises(ReportInputError, match="number 1 is not 'Name: value'"):
            parse_header(text, 1)
    else:
        assert parse_header(text, 1) == expected


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("X-Scope-OrgID team-a-secret", "--prometheus-header number 2 is not 'Name: value'"),
        (": team-a-secret", "--prometheus-header number 2 is not 'Name: value'"),
        ("X-Scope-OrgID:", "--prometheus-header X-Scope-OrgID has no value"),
        ("X-Scope-OrgID: team-a-secret\r\nX-Evil: 1", "--prometheus-header X-Scope-OrgID has no value, or control"),
        ("Content-Type: team-a-secret", "--prometheus-header Content-Type frames the request"),
        ("host: team-a-secret", "--prometheus-header host frames the request"),
    ],
)
def test_a_malformed_header_is_one_line_naming_it_never_its_value(text: str, said: str) -> None:
    with pytest.raises(ReportInputError) as refused:
        parse_header(text, 2)
    assert said in str(refused.value) and "team-a-secret" not in str(refused.value)


def test_headers_are_sent_as_given_and_twice_the_same_name_is_refused() -> None:
    access = prometheus_access(URL, headers=["X-Scope-OrgID: team-a", "X-Extra: 1"])
    assert access.request_headers() == {"X-Scope-OrgID": "team-a", "X-Extra": "1"}
    message = _refused(headers=["X-Scope-OrgID: a", "x-scope-orgid: b"])
    assert message == "--prometheus-header x-scope-orgid is given twice: give it once"


def test_an_authorization_header_is_refused_only_beside_a_token_or_basic_auth(tmp_path: Path) -> None:
    assert prometheus_access(URL, headers=["Authorization: Bearer x"]).request_headers() == {
        "Authorization": "Bearer x"
    }
    token_file = _file(tmp_path, "token", TOKEN)
    message = _refused(bearer_token_file=token_file, headers=[f"Authorization: Bearer {TOKEN}"])
    assert message.startswith("--prometheus-header Authorization and --prometheus-bearer-token-file both set")


def test_a_token_file_is_read_again_when_it_changes_and_a_half_written_one_keeps_the_last(tmp_path: Path) -> None:
    token_file = _file(tmp_path, "token", f"{TOKEN}\n")
    access = prometheus_access(URL, bearer_token_file=token_file)
    assert access.request_headers() == {"Authorization": f"Bearer {TOKEN}"}
    fresh = _file(tmp_path, "token.new", "rotated-token")
    os.replace(fresh, token_file)
    assert access.request_headers() == {"Authorization": "Bearer rotated-token"}
    token_file.write_text("", encoding="utf-8")  # truncated, the new token not yet written
    assert access.request_headers() == {"Authorization": "Bearer rotated-token"}
    token_file.write_text("third-token", encoding="utf-8")
    assert access.request_headers() == {"Authorization": "Bearer third-token"}
    token_file.unlink()
    assert access.request_headers() == {"Authorization": "Bearer third-token"}


def test_a_token_file_that_cannot_give_a_token_is_refused_before_any_query(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    assert _refused(bearer_token_file=missing).startswith(
        f"--prometheus-bearer-token-file {missing} cannot be read (No such file or directory)"
    )
    empty = _file(tmp_path, "empty", "\n")
    assert "does not hold one bearer token" in _refused(bearer_token_file=empty)
    two_lines = _file(tmp_path, "two", f"{TOKEN}\nsecond\n")
    assert "does not hold one bearer token" in _refused(bearer_token_file=two_lines)


def test_a_literal_token_is_sent_and_one_with_spaces_is_refused_without_showing_it() -> None:
    assert prometheus_access(URL, bearer_token=TOKEN).request_headers() == {"Authorization": f"Bearer {TOKEN}"}
    message = _refused(bearer_token=f"Bearer {TOKEN}")
    assert message.startswith("--prometheus-bearer-token is not one token")


def test_basic_auth_sends_the_file_password_and_reads_it_again_when_it_changes(tmp_path: Path) -> None:
    password_file = _file(tmp_path, "password", f"{PASSWORD}\n")
    access = prometheus_access(URL, basic_auth="alice", password_file=password_file)
    expected = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert access.request_headers() == {"Authorization": f"Basic {expected}"}
    os.replace(_file(tmp_path, "new", "other"), password_file)
    assert access.request_headers() == {"Authorization": f"Basic {base64.b64encode(b'alice:other').decode()}"}
    assert (
        access.described
        == f"basic auth as user 'alice' with the password of --prometheus-password-file {password_file}"
    )


def test_basic_auth_needs_a_password_file_a_plain_user_name_and_no_token(tmp_path: Path) -> None:
    password_file = _file(tmp_path, "password", PASSWORD)
    assert "go together: give both" in _refused(basic_auth="alice")
    assert "go together: give both" in _refused(password_file=password_file)
    assert "without ':'" in _refused(basic_auth="alice:secret", password_file=password_file)
    message = _refused(basic_auth="alice", password_file=password_file, bearer_token=TOKEN)
    assert message == (
        "--prometheus-bearer-token and --prometheus-basic-auth both set the Authorization header: give one"
    )


def test_the_cli_refuses_two_authorization_flags_and_groups_the_access_flags() -> None:
    parser = build_parser()
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(
            ["report", "--prometheus", URL, "--prometheus-bearer-token", "a", "--prometheus-basic-auth", "b"]
        )
    assert exited.value.code == 2
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    report = commands.choices["report"]
    group = next(g for g in report._action_groups if g.title == "Prometheus access")
    flags = {option for action in group._group_actions for option in action.option_strings}
    assert {"--prometheus-bearer-token-file", "--prometheus-header", "--prometheus-ca-file"} <= flags


def test_tls_flags_need_an_https_url_and_load_or_say_why(tmp_path: Path) -> None:
    pem = _file(tmp_path, "ca.crt", "not a certificate")
    assert _refused(ca_file=pem) == "--prometheus-ca-file applies to https only: give --prometheus an https:// URL"
    https = "https://prometheus:9090"
    assert _refused(url=https, ca_file=pem).startswith(f"--prometheus-ca-file {pem} does not load")
    assert "give both or neither" in _refused(url=https, cert_file=pem)
    assert "give one" in _refused(url=https, ca_file=pem, insecure_skip_verify=True)
    assert _refused(url=https, cert_file=pem, key_file=pem).startswith(f"--prometheus-cert-file {pem} and")
    assert "--prometheus-server-name is empty" in _refused(url=https, server_name=" ")
    insecure = prometheus_access(https, insecure_skip_verify=True, server_name="prometheus.example")
    assert insecure.ssl_context is not None and not insecure.ssl_context.check_hostname
    assert insecure.server_name == "prometheus.example"


def test_a_url_with_credentials_is_refused_without_showing_them() -> None:
    with pytest.raises(ReportInputError) as refused:
        prometheus_url(f"https://alice:{PASSWORD}@prometheus:9090")
    assert PASSWORD not in str(refused.value) and "--prometheus-password-file" in str(refused.value)


def test_no_secret_in_the_repr_and_redact_removes_each_form(tmp_path: Path) -> None:
    access = prometheus_access(URL, basic_auth="alice", password_file=_file(tmp_path, "password", PASSWORD))
    encoded = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert PASSWORD not in repr(access) and encoded not in repr(access)
    assert access.redact(f"bad {PASSWORD} or {encoded}") == "bad [redacted] or [redacted]"


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_is_one_line_naming_the_credentials_never_the_secret(status: int, tmp_path: Path) -> None:
    token_file = _file(tmp_path, "token", TOKEN)

    def refuse(path: str, query: str) -> tuple[int, bytes]:
        del path, query
        return status, f"token {TOKEN} is not allowed here".encode()  # a proxy echoing what it was sent

    with serving(refuse) as fake:
        run = run_report(
            "--prometheus",
            fake.url,
            "--prometheus-bearer-token-file",
            str(token_file),
            "--prometheus-header",
            "X-Scope-OrgID: team-a",
            out=tmp_path / "out",
        )
    line = run.assert_one_error_line()
    assert run.exit_code == 3
    assert line == (
        f"kuota report: error: Prometheus at {fake.url} refused the bearer token of --prometheus-bearer-token-file "
        f"{token_file}, with header(s) X-Scope-OrgID (HTTP {status}: token [redacted] is not allowed here); check "
        "the credentials, and the tenant header where the server is multi-tenant"
    )
    assert TOKEN not in run.stderr
