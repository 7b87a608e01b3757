"""The Dockerfiles copy files that exist and run the chart's commands; ``tests/integration/images`` builds and
runs them."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from tests.unit.chart.rendering import REPO_ROOT, VALUES_SETS, containers, pod_spec, render

IMAGES = REPO_ROOT / "images"
DOCKERFILES = {"manager": IMAGES / "Dockerfile.manager", "exporter": IMAGES / "Dockerfile.exporter"}
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def _instructions(path: Path) -> list[tuple[str, str]]:
    logical = re.sub(r"\\\n\s*", " ", path.read_text())  # a backslash continues an instruction on the next line
    lines = [line.strip() for line in logical.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines if line and not line.startswith("#")
    ]


def _symlinks(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.iterdir()):
        if path.is_symlink():
            found.append(path)
        if path.is_dir() and path.name != "__pycache__":
            found += _symlinks(path)
    return found


def _linked_folder(link: Path) -> str:
    return link.resolve().relative_to(REPO_ROOT).as_posix()


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_the_image_copies_every_package_pip_installs_and_nothing_missing(image: str) -> None:
    copied = [
        source
        for op, args in _instructions(DOCKERFILES[image])
        if op == "COPY" and "--from" not in args
        for source in args.split()[:-1]
    ]
    for source in copied:
        assert (REPO_ROOT / source).exists(), f"{image}: COPY {source} names nothing in the repository"
    # kuota/ names the plane folders (and the seed example) through symlinks: the build needs their targets too.
    needed = {"kuota"} | {_linked_folder(link) for link in _symlinks(REPO_ROOT / "kuota")}
    have = {source.rstrip("/") for source in copied}
    assert needed <= have, f"{image}: pip install . needs {sorted(needed - have)}"
    assert {"pyproject.toml", "setup.py", "README.md"} <= set(copied), (
        "the build reads pyproject.toml, the readme it names and setup.py, which compiles the engine"
    )
    ignore = (IMAGES / f"{DOCKERFILES[image].name}.dockerignore").read_text().splitlines()
    for source in copied:
        assert f"!{source.rstrip('/')}" in ignore or f"!{source.rstrip('/')}/" in ignore, f"{source} is ignored"


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_the_image_is_multi_stage_pinned_non_root_and_enters_through_kuota(image: str) -> None:
    instructions = _instructions(DOCKERFILES[image])
    stages = [args for op, args in instructions if op == "FROM"]
    assert len(stages) == 2, "build and runtime stages"
    default = next(args for op, args in instructions if op == "ARG" and args.startswith("BASE_IMAGE="))
    base = default.split("=", 1)[1]
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", base), f"unpinned base {base}"
    python = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, base.split(":")[1].split("-")[0].split(".")[:2])) >= tuple(map(int, python.split("."))), (
        f"{base} is older than requires-python {python}"
    )
    user = [args for op, args in instructions if op == "USER"]
    assert user == ["65532:65532"], "the runtime stage runs as a non-root user"
    entrypoint = json.loads(next(args for op, args in instructions if op == "ENTRYPOINT"))
    assert entrypoint == ["kuota"]
    assert "kuota" in PYPROJECT["project"]["scripts"], "the entry point is the console script pip installs"
    assert instructions[-1][0] in ("CMD", "ENTRYPOINT")


def _install(image: str) -> str:
    """The RUN that installs kuota itself (its dependencies come in an earlier layer)."""
    return next(args for op, args in _instructions(DOCKERFILES[image]) if op == "RUN" and "--no-deps ." in args)


def _dependencies(image: str) -> str:
    """Every RUN that installs dependencies listed in pyproject.toml."""
    return "\n".join(args for op, args in _instructions(DOCKERFILES[image]) if op == "RUN" and "tomllib" in args)


def _build_steps_through_the_compile(image: str) -> list[tuple[str, str]]:
    instructions = _instructions(DOCKERFILES[image])
    start = next(i for i, (op, args) in enumerate(instructions) if op == "FROM" and args.endswith(" AS build"))
    end = next(i for i, (op, args) in enumerate(instructions) if op == "RUN" and "--no-deps ." in args)
    return instructions[start : end + 1]


def test_the_exporter_build_repeats_the_managers_steps_through_the_compile_so_they_share_those_layers() -> None:
    """A layer cache keys each step on the steps before it: identical steps build (and compile) once for both."""
    assert _build_steps_through_the_compile("exporter") == _build_steps_through_the_compile("manager")


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_the_image_build_fails_unless_the_engine_was_compiled(image: str) -> None:
    """setup.py falls back to pure Python where it cannot compile; an image must not do so silently."""
    instructions = _instructions(DOCKERFILES[image])
    compiler = next(args for op, args in instructions if op == "RUN" and "apt-get install" in args)
    # gcc only recommends the C library's headers: without libc6-dev the compile finds no stdio.h.
    assert {"gcc", "libc6-dev"} <= set(compiler.split())
    assert _install(image).endswith("/opt/kuota/bin/kuota version | grep 'compiled (mypyc)'")


def test_the_exporter_image_installs_the_extras_its_commands_import() -> None:
    install = _dependencies("exporter")
    assert '["optional-dependencies"]' in install
    extras = set(re.findall(r'\*p\["([a-z]+)"\]', install))
    assert extras == {"exporter", "report"}
    assert extras <= set(PYPROJECT["project"]["optional-dependencies"])
    assert "optional-dependencies" not in _dependencies("manager"), "the manager needs no extra"


def test_the_chart_runs_each_image_with_a_subcommand_it_carries() -> None:
    rendered = render(VALUES_SETS["report"])
    expectations = {("kuota-manager", "manager"): "manager", ("kuota-exporter", "exporter"): "exporter"}
    for (name, container_name), subcommand in expectations.items():
        kind = "Deployment" if container_name == "manager" else "DaemonSet"
        container = next(c for c in containers(pod_spec(rendered.one(kind, name))) if c["name"] == container_name)
        assert container["image"].startswith(f"kuota/{container_name}:"), container["image"]
        assert container["args"][0] == subcommand
    report = next(c for c in containers(pod_spec(rendered.one("CronJob"))) if c["name"] == "report")
    assert report["image"].startswith("kuota/exporter:"), "kuota report needs the exporter image's report extra"
    assert "\nkuota report " in report["command"][2]
