"""The one way kuota writes a file: whole or not at all, never through a symlink, private where it must be.

Each output goes to a temporary file created in the destination's own folder with ``O_EXCL | O_NOFOLLOW`` and
its final mode from the first byte, is flushed to disk, and is then renamed over the final name. ``rename``
replaces a symlink planted at the final name instead of following it, so a link cannot send a private key
elsewhere, and a reader sees the old file or the new one, never a half-written one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO

PRIVATE_FILE_MODE = 0o600
PRIVATE_FOLDER_MODE = 0o700
PUBLIC_FILE_MODE = 0o644


def private_folder(path: Path) -> Path:
    """``path`` as a folder for private files: created with mode 0700 when missing (its parents as usual); an
    existing folder is used as it is, since the files written into it carry their own modes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, PRIVATE_FOLDER_MODE)
    except FileExistsError:
        if not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "exists and is not a folder", str(path)) from None
    else:
        os.chmod(path, PRIVATE_FOLDER_MODE)  # exactly 0700, whatever the umask
    return path


@contextlib.contextmanager
def atomic_writer(path: Path, *, mode: int = PUBLIC_FILE_MODE) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new content into; it replaces ``path`` when the block ends without an
    error, and is removed, leaving ``path`` as it was, when the block raises."""
    temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        # The umask may have narrowed the mode given to open(); the file gets exactly ``mode``.
        os.fchmod(descriptor, mode)
        with os.fdopen(descriptor, "wb") as file:
            descriptor = -1
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if descriptor >= 0:
            os.close(descriptor)
        temporary.unlink(missing_ok=True)
        raise


def write_file(path: Path, content: str | bytes, *, mode: int = PUBLIC_FILE_MODE) -> None:
    """Replace ``path`` with ``content`` atomically (see the module's docstring)."""
    with atomic_writer(path, mode=mode) as file:
        file.write(content.encode("utf-8") if isinstance(content, str) else content)
