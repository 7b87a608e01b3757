"""The ``kuota`` command: one entry point, helpful --help everywhere, heavy dependencies loaded lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kuota import __version__
from kuota.cli import build_parser, main
from kuota.engine_build import engine_build

SUBCOMMANDS = ("manager", "simulate", "exporter", "report", "certs", "version")


def test_top_level_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert f"    {name}" in out


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_help_explains_itself_with_an_example(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([name, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "example: kuota " + name in out


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"kuota {__version__} (quota engine: {engine_build()})\n"


def test_no_subcommand_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([])
    assert exited.value.code == 2


def test_building_the_command_line_imports_no_nvml_grpc_http_or_kubernetes_client() -> None:
    check = (
        "import sys\n"
        "from kuota.cli import build_parser\n"
        "build_parser()\n"
        "heavy = [m for m in ('pynvml', 'grpc', 'aiohttp', 'kuota.kube.client', 'matplotlib') if m in sys.modules]\n"
        "print('heavy=' + ','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "heavy="


def test_the_exporter_and_the_kubernetes_client_load_no_yaml_until_a_kubeconfig_is_read() -> None:
    """Every MiB counts in a per-node exporter (RSS <= 60 MiB): in a pod it never reads a kubeconfig."""
    check = "import sys\nimport kuota.exporter.service, kuota.kube.client\nprint('yaml' in sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "False"
