"""Text files read one bounded line at a time: the workloads file (JSON Lines or a trace CSV).

Nothing is read whole: a line longer than ``MAX_LINE_BYTES`` is refused before more of it is read, so memory
stays bounded however the file is made (no newline at all, ``/dev/zero``), and a workloads stream can be a
pipe. Bytes are decoded here as UTF-8, so a message can name the line and column of a bad byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from kuota.simulator.errors import WorkloadFileError
from kuota.simulator.limits import MAX_LINE_BYTES


def numbered_lines(stream: BinaryIO, source: str) -> Iterator[tuple[int, str]]:
    """``(line number, text with its newline)`` for each line of ``stream`` (a UTF-8 byte order mark dropped);
    ``source`` names it in errors."""
    number = 0
    while True:
        number += 1
        try:
            raw = stream.readline(MAX_LINE_BYTES + 1)
        except OSError as error:
            raise WorkloadFileError(f"{source}:{number}: cannot be read: {error.strerror or error}") from error
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES:
            raise WorkloadFileError(
                f"{source}:{number}: longer than {MAX_LINE_BYTES} bytes; a workload is one line of a few hundred"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            column = len(raw[: error.start].decode("utf-8", "replace")) + 1
            raise WorkloadFileError(
                f"{source}:{number}: not UTF-8 text (byte 0x{raw[error.start]:02x} at column {column}); "
                "save the file as UTF-8"
            ) from error
        yield number, text[1:] if number == 1 and text.startswith("\ufeff") else text
