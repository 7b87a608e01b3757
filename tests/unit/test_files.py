"""How kuota writes files: whole or not at all, never through a symlink, private keys private from the first
byte (``kuota.files``, used by ``kuota certs``, ``kuota report`` and ``kuota simulate``)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kuota.cli import main
from kuota.files import PRIVATE_FILE_MODE, atomic_writer, private_folder, write_file


def test_a_symlink_at_the_final_name_is_replaced_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    link = tmp_path / "report.md"
    link.symlink_to(target)
    dangling = tmp_path / "report.json"
    dangling.symlink_to(tmp_path / "would-be-created")

    write_file(link, "new")
    write_file(dangling, "{}")

    assert target.read_text() == "untouched"
    assert not (tmp_path / "would-be-created").exists()
    assert not link.is_symlink() and link.read_text() == "new"
    assert not dangling.is_symlink() and dangling.read_text() == "{}"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text("old")

    class WriteInterruptedError(Exception):
        pass

    with pytest.raises(WriteInterruptedError), atomic_writer(path) as file:
        file.write(b"half of the new")
        raise WriteInterruptedError
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_private_file_has_its_mode_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        write_file(tmp_path / "tls.key", b"secret", mode=PRIVATE_FILE_MODE)
        folder = private_folder(tmp_path / "new" / "tls")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_kuota_certs_never_shows_a_key_at_a_wider_mode_and_never_follows_a_planted_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A watcher once read ca.key and tls.key at 0644 with their content, in 3 runs of 3."""
    out = tmp_path / "tls"
    seen_wide: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                entries = list(os.scandir(out))
            except FileNotFoundError:
                continue
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if ".key" in entry.name and not entry.is_symlink() and info.st_mode & 0o077:
                    seen_wide.append(f"{entry.name} {stat.filemode(info.st_mode)} {info.st_size} bytes")

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(3):  # in another process, so that the watcher really runs meanwhile
            subprocess.run([sys.executable, "-m", "kuota", "certs", "--out", str(out)], check=True, capture_output=True)
    finally:
        done.set()
        watcher.join()
    assert seen_wide == []
    assert stat.S_IMODE(out.stat().st_mode) == 0o700

    stolen = tmp_path / "stolen.key"
    (out / "tls.key").unlink()
    (out / "tls.key").symlink_to(stolen)
    assert main(["certs", "--out", str(out)]) == 0
    assert not stolen.exists()
    assert not (out / "tls.key").is_symlink()
    assert stat.S_IMODE((out / "tls.key").stat().st_mode) == 0o600
    assert "PRIVATE KEY" in (out / "tls.key").read_text()
    capsys.readouterr()


def test_kuota_certs_says_in_one_line_when_out_is_not_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    assert main(["certs", "--out", str(tmp_path / "file")]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "not a folder" in error, error
