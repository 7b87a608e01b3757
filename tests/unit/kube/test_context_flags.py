"""``--kubeconfig [PATH]`` and ``--context NAME`` of ``kuota report`` and ``kuota manager``: which kubeconfig
they read (no API server is reached: each case stops at the kubeconfig, in one line)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from kuota.cli import main
from tests.unit.kube.conftest import write_kubeconfig

INSECURE = {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}


def _run(*args: str) -> tuple[int, str]:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(list(args))
    return code, stderr.getvalue()


def _report(tmp_path: Path, *args: str) -> tuple[int, str]:
    return _run("report", "--prometheus", "http://127.0.0.1:1", "--out", str(tmp_path / "out"), *args)


@pytest.fixture
def listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """KUBECONFIG lists one kubeconfig, whose only context is 'ctx'."""
    path = write_kubeconfig(tmp_path / "listed", INSECURE, {"token": "t"})
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


def test_report_context_alone_reads_the_files_kubeconfig_lists(tmp_path: Path, listed: Path) -> None:
    code, stderr = _report(tmp_path, "--context", "other")
    assert code == 2
    assert stderr == (
        f"kuota report: error: KUBECONFIG {listed} --context other is not a usable kubeconfig: kubeconfig {listed}: "
        "no context named 'other'; pass --context with one of its contexts (ctx)\n"
    )


def test_report_kubeconfig_without_a_path_reads_home_kube_config_when_kubeconfig_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, stderr = _report(tmp_path, "--kubeconfig")
    assert code == 2
    assert stderr == (
        "kuota report: error: ~/.kube/config is not a usable kubeconfig: no kubeconfig: KUBECONFIG is unset and "
        f"{tmp_path / '.kube' / 'config'} does not exist; pass --kubeconfig PATH or set KUBECONFIG\n"
    )


def test_report_kubeconfig_path_wins_over_kubeconfig_and_context_goes_with_it(tmp_path: Path, listed: Path) -> None:
    given = write_kubeconfig(tmp_path / "given", INSECURE, {"token": "t"}, current="absent")
    code, stderr = _report(tmp_path, "--kubeconfig", str(given))
    assert code == 2
    assert f"--kubeconfig {given} is not a usable kubeconfig: kubeconfig {given}: no context named 'absent'" in stderr
    assert str(listed) not in stderr


def test_report_context_does_not_go_with_in_cluster(tmp_path: Path) -> None:
    code, stderr = _report(tmp_path, "--in-cluster", "--context", "ctx")
    assert (code, stderr) == (
        2,
        "kuota report: error: --context picks a kubeconfig context: pass it with --kubeconfig, not --in-cluster\n",
    )


def test_manager_context_reads_the_files_kubeconfig_lists(listed: Path) -> None:
    code, stderr = _run("manager", "--context", "other", "--log-level", "ERROR")
    assert code == 2
    assert stderr == (
        f"kuota manager: kubeconfig {listed}: no context named 'other'; pass --context with one of its contexts (ctx)\n"
    )
