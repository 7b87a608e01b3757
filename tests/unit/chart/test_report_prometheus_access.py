"""report.prometheusAccess: the report CronJob mounts one Secret and passes the "Prometheus access" flags the
CLI parses; half-given credentials fail at install with the value named."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from tests.unit.chart.rendering import CHART, RELEASE, pod_spec, render, run_helm
from tests.unit.chart.test_manager import parse_with_the_cli

MOUNT = "/etc/kuota-report/prometheus"


def _values(access: dict[str, Any], **report: Any) -> dict[str, Any]:
    base = {"enabled": True, "prometheusUrl": "https://mimir.example/prometheus", "prometheusAccess": access}
    return {"report": base | report}


def _report_container(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = pod_spec(render(values).one("CronJob", "kuota-report"))
    return spec, next(c for c in spec["containers"] if c["name"] == "report")


def _parsed_command(container: dict[str, Any]) -> Any:
    """The script's ``kuota report`` line with the container's args where it says "$@", as the CLI parses it."""
    line = next(line for line in container["command"][2].splitlines() if line.startswith("kuota report"))
    env = {item["name"]: item.get("value") for item in container["env"]}
    words = shlex.split(line.replace("$run", "2026-01-05T0600Z").replace('"$@"', ""))
    words = [env.get(w.lstrip("$"), w) if w.startswith("$") else w for w in words]
    return parse_with_the_cli(words[1:] + container.get("args", []))


def test_a_token_ca_client_certificate_and_tenant_header_come_from_one_mounted_secret() -> None:
    access = {
        "secretName": "mimir-credentials",
        "bearerTokenKey": "token",
        "tls": {"caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key", "serverName": "mimir.internal"},
        "headers": {"X-Scope-OrgID": "team-a"},
    }
    spec, container = _report_container(_values(access, extraArgs=["--timeout", "60"]))
    parsed = _parsed_command(container)
    assert parsed.prometheus == "https://mimir.example/prometheus"
    assert parsed.prometheus_bearer_token_file == f"{MOUNT}/token"
    assert (parsed.prometheus_ca_file, parsed.prometheus_cert_file, parsed.prometheus_key_file) == (
        f"{MOUNT}/ca.crt",
        f"{MOUNT}/tls.crt",
        f"{MOUNT}/tls.key",
    )
    assert parsed.prometheus_server_name == "mimir.internal"
    assert parsed.prometheus_header == ["X-Scope-OrgID: team-a"]
    assert parsed.timeout == 60.0, "extraArgs still reach the CLI"
    assert (parsed.prometheus_bearer_token, parsed.prometheus_basic_auth) == (None, None)
    assert {"name": "prometheus-access", "mountPath": MOUNT, "readOnly": True} in container["volumeMounts"]
    volume = {v["name"]: v for v in spec["volumes"]}["prometheus-access"]
    assert volume["secret"] == {"secretName": "mimir-credentials", "defaultMode": 0o440}
    assert not any("subPath" in mount for mount in container["volumeMounts"]), "a subPath mount never sees rotation"


def test_basic_auth_passes_the_user_and_the_password_file_never_the_password() -> None:
    access = {"secretName": "prometheus-basic", "basicAuth": {"username": "kuota", "passwordKey": "password"}}
    _, container = _report_container(_values(access))
    parsed = _parsed_command(container)
    assert (parsed.prometheus_basic_auth, parsed.prometheus_password_file) == ("kuota", f"{MOUNT}/password")
    assert parsed.prometheus_ca_file is None and not parsed.prometheus_insecure_skip_verify


def test_without_prometheus_access_there_is_no_secret_and_no_access_flag() -> None:
    spec, container = _report_container(_values({}))
    parsed = _parsed_command(container)
    assert parsed.prometheus_bearer_token_file is None and parsed.prometheus_header == []
    assert "prometheus-access" not in {v["name"] for v in spec["volumes"]}
    assert "args" not in container


@pytest.mark.parametrize(
    ("access", "said"),
    [
        ({"bearerTokenKey": "token"}, "report.prometheusAccess: the keys it names need secretName"),
        ({"secretName": "s", "basicAuth": {"username": "kuota"}}, "basicAuth needs both username and passwordKey"),
        ({"secretName": "s", "tls": {"certKey": "tls.crt"}}, "tls needs both certKey and keyKey"),
        (
            {"secretName": "s", "bearerTokenKey": "t", "basicAuth": {"username": "u", "passwordKey": "p"}},
            "bearerTokenKey and basicAuth both set the Authorization header",
        ),
        ({"headers": {"X Scope": "a"}}, "invalid propertyName 'X Scope'"),
        ({"basicAuth": {"username": "a:b"}}, "at '/report/prometheusAccess/basicAuth/username'"),
    ],
)
def test_half_given_access_fails_at_install_naming_the_value(access: dict[str, Any], said: str) -> None:
    result = run_helm("template", RELEASE, str(CHART), values=_values(access), check=False)
    assert result.returncode != 0 and said in result.stderr, result.stderr
