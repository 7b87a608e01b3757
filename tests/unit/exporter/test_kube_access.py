from pathlib import Path

import pytest
import yaml

from exporter.errors import ConfigurationError
from exporter.kube_access import from_kubeconfig, in_cluster


def write_kubeconfig(path: Path, user: dict[str, str], current: str = "ctx") -> Path:
    path.write_text(yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": "https://10.0.0.1:6443/", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": current,
    }))
    return path


def test_a_token_kubeconfig_gives_the_server_and_a_bearer_header(tmp_path: Path) -> None:
    access = from_kubeconfig(write_kubeconfig(tmp_path / "config", {"token": "s3cret"}))
    assert access.server == "https://10.0.0.1:6443"
    assert access.headers == {"Authorization": "Bearer s3cret"}


def test_a_kubeconfig_naming_a_missing_context_says_which(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no context named 'other'"):
        from_kubeconfig(write_kubeconfig(tmp_path / "config", {"token": "t"}, current="other"))


def test_outside_a_pod_without_a_kubeconfig_the_error_says_what_to_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigurationError, match="--kubeconfig"):
        in_cluster()
