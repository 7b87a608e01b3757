"""One builder per cached binary: a second process asking for the same binary waits for the first's build."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from tests.cluster.binaries import _one_builder


def _try_to_build(target: Path) -> bool:
    with (target.parent / f"{target.name}.lock").open("w") as other:  # as another process opens it
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def test_a_build_in_progress_holds_off_another_builder_of_the_same_binary(tmp_path: Path) -> None:
    target = tmp_path / "bin" / "helm-v4"
    with _one_builder(target):
        assert not _try_to_build(target)
        assert _try_to_build(tmp_path / "bin" / "etcd-v3")  # other binaries build meanwhile
    assert _try_to_build(target)


def test_the_build_lock_is_released_when_the_build_fails(tmp_path: Path) -> None:
    target = tmp_path / "bin" / "kubernetes-v1"
    with pytest.raises(RuntimeError), _one_builder(target):
        raise RuntimeError("go build failed")
    assert _try_to_build(target)
