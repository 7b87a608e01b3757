"""Which kubeconfig files are read and how they merge (as kubectl merges them), which context is used, and
what a cluster's proxy-url becomes."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuota.errors import ConfigurationError
from kuota.kube.kubeconfig import from_kubeconfig


def _config(
    path: Path,
    *,
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, tuple[str, str]] | None = None,
    current: str | None = None,
) -> Path:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": body} for name, body in (clusters or {}).items()],
        "users": [{"name": name, "user": body} for name, body in (users or {}).items()],
        "contexts": [
            {"name": name, "context": {"cluster": cluster, "user": user}}
            for name, (cluster, user) in (contexts or {}).items()
        ],
    }
    if current is not None:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def _server(number: int) -> dict[str, Any]:
    return {"server": f"https://10.0.0.{number}:6443", "insecure-skip-tls-verify": True}


def _environ(*paths: Path, home: Path) -> dict[str, str]:
    return {"KUBECONFIG": os.pathsep.join(map(str, paths)), "HOME": str(home)}


def test_the_first_file_to_name_an_entry_gives_all_of_it_and_the_first_current_context_wins(tmp_path: Path) -> None:
    first = _config(
        tmp_path / "first",
        clusters={"shared": _server(1)},
        users={"shared-user": {"token": "from-first"}},
        contexts={"only-first": ("shared", "shared-user")},
    )
    second = _config(
        tmp_path / "second",
        clusters={"shared": _server(2), "own": _server(3)},
        users={"shared-user": {"token": "from-second"}, "own-user": {"token": "own"}},
        contexts={"both": ("shared", "shared-user"), "own": ("own", "own-user")},
        current="both",
    )
    third = _config(tmp_path / "third", contexts={"later": ("own", "own-user")}, current="later")
    environ = _environ(first, second, third, home=tmp_path)
    # current-context: the first file that sets one (second); its entries resolve across files, first wins.
    access = from_kubeconfig(environ=environ)
    assert (access.server, access.headers) == ("https://10.0.0.1:6443", {"Authorization": "Bearer from-first"})
    own = from_kubeconfig(context="own", environ=environ)
    assert (own.server, own.headers) == ("https://10.0.0.3:6443", {"Authorization": "Bearer own"})
    assert from_kubeconfig(context="only-first", environ=environ).server == "https://10.0.0.1:6443"


def test_files_kubeconfig_lists_that_do_not_exist_are_skipped_and_duplicates_read_once(tmp_path: Path) -> None:
    real = _config(
        tmp_path / "real", clusters={"c": _server(4)}, users={"u": {"token": "t"}}, contexts={"x": ("c", "u")}
    )
    environ = _environ(tmp_path / "absent", real, real, home=tmp_path)
    environ["KUBECONFIG"] += os.pathsep  # an empty element, as a trailing separator leaves
    assert from_kubeconfig(context="x", environ=environ).server == "https://10.0.0.4:6443"


def test_paths_in_an_entry_are_relative_to_its_own_file(tmp_path: Path) -> None:
    first = _config(tmp_path / "a" / "config", clusters={"c": _server(5)}, contexts={"x": ("c", "u")}, current="x")
    second = _config(tmp_path / "b" / "config", users={"u": {"tokenFile": "token"}})
    (tmp_path / "b" / "token").write_text("beside-the-second-file\n")
    access = from_kubeconfig(environ=_environ(first, second, home=tmp_path))
    assert access.headers == {"Authorization": "Bearer beside-the-second-file"}
    assert access.token_file == tmp_path / "b" / "token"


def test_without_kubeconfig_or_a_path_the_home_kube_config_is_read(tmp_path: Path) -> None:
    _config(
        tmp_path / ".kube" / "config",
        clusters={"c": _server(6)},
        users={"u": {"token": "home"}},
        contexts={"x": ("c", "u")},
        current="x",
    )
    for environ in ({"HOME": str(tmp_path)}, {"HOME": str(tmp_path), "KUBECONFIG": ""}):
        assert from_kubeconfig(environ=environ).server == "https://10.0.0.6:6443"


def test_a_path_given_wins_over_kubeconfig(tmp_path: Path) -> None:
    listed = _config(
        tmp_path / "listed", clusters={"c": _server(7)}, users={"u": {}}, contexts={"x": ("c", "u")}, current="x"
    )
    given = _config(
        tmp_path / "given", clusters={"c": _server(8)}, users={"u": {}}, contexts={"x": ("c", "u")}, current="x"
    )
    assert from_kubeconfig(given, environ=_environ(listed, home=tmp_path)).server == "https://10.0.0.8:6443"


def test_no_file_to_read_says_what_was_looked_for(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigurationError, match=r"none of the kubeconfigs KUBECONFIG lists exists .*--kubeconfig PATH"
    ):
        from_kubeconfig(environ=_environ(tmp_path / "a", tmp_path / "b", home=tmp_path))
    expected = f"KUBECONFIG is unset and {tmp_path / '.kube' / 'config'} does not exist; pass --kubeconfig PATH"
    with pytest.raises(ConfigurationError, match=re.escape(expected)):
        from_kubeconfig(environ={"HOME": str(tmp_path)})


def test_a_context_that_no_file_has_is_refused_listing_the_known_ones(tmp_path: Path) -> None:
    first = _config(tmp_path / "first", contexts={"alpha": ("c", "u")})
    second = _config(tmp_path / "second", contexts={"beta": ("c", "u")}, current="alpha")
    environ = _environ(first, second, home=tmp_path)
    with pytest.raises(ConfigurationError) as raised:
        from_kubeconfig(context="gamma", environ=environ)
    assert str(raised.value) == (
        f"kubeconfigs {first}{os.pathsep}{second}: no context named 'gamma'; "
        "pass --context with one of its contexts (alpha, beta)"
    )
    with pytest.raises(ConfigurationError, match=re.escape(f"kubeconfig {first}: no cluster named 'c'")):
        from_kubeconfig(environ=environ)


def test_no_current_context_anywhere_says_to_pass_one(tmp_path: Path) -> None:
    first = _config(tmp_path / "first", contexts={"alpha": ("c", "u")})
    with pytest.raises(ConfigurationError, match=r"has no current-context; .* or pass --context NAME"):
        from_kubeconfig(environ=_environ(first, home=tmp_path))


def _proxied(tmp_path: Path, proxy_url: str) -> Path:
    return _config(
        tmp_path / "config",
        clusters={"c": {**_server(9), "proxy-url": proxy_url}},
        users={"u": {}},
        contexts={"x": ("c", "u")},
        current="x",
    )


def test_an_http_proxy_url_is_kept_and_its_user_and_password_become_proxy_authorization(tmp_path: Path) -> None:
    access = from_kubeconfig(_proxied(tmp_path, "http://kuota%40corp:p%3Ass@proxy.corp:3128"))
    assert access.proxy == "http://proxy.corp:3128"
    assert access.proxy_headers == {"Proxy-Authorization": f"Basic {base64.b64encode(b'kuota@corp:p:ss').decode()}"}
    plain = from_kubeconfig(_proxied(tmp_path, "https://[fd00::1]:8443"))
    assert (plain.proxy, plain.proxy_headers) == ("https://[fd00::1]:8443", {})


@pytest.mark.parametrize(
    ("proxy_url", "message"),
    [
        ("socks5://kuota:hunter2@proxy:1080", "proxy-url is a socks5:// proxy, which kuota does not support"),
        ("socks5h://proxy:1080", "proxy-url is a socks5h:// proxy, which kuota does not support"),
        ("ftp://proxy:21", "proxy-url is not an http:// or https:// URL with a host"),
        ("http://proxy:port", "proxy-url is not an http:// or https:// URL with a host"),
        ("proxy:3128", "proxy-url is not an http:// or https:// URL with a host"),
    ],
)
def test_a_proxy_url_kuota_cannot_use_is_refused_naming_the_cluster_without_quoting_it(
    tmp_path: Path, proxy_url: str, message: str
) -> None:
    path = _proxied(tmp_path, proxy_url)
    with pytest.raises(ConfigurationError) as raised:
        from_kubeconfig(path)
    assert str(raised.value).startswith(f"kubeconfig {path}: cluster 'c' {message}")
    assert "hunter2" not in str(raised.value)
