"""``--workloads FILE``: a ``kubectl get workloads.kueue.x-k8s.io -A -o json`` dump, read incrementally.

A week's dump of a busy cluster is hundreds of megabytes, and decoded whole it takes several times that in
memory, which the report's CronJob does not have. So the file is read a chunk at a time: the top-level object
is walked key by key, and each element of its ``items`` is decoded on its own and handed straight to
:class:`~kuota.report.sources.workload_history.WorkloadReader`, which keeps only the fields the history needs.
Memory is then the Workloads' figures plus the largest single item, whatever the file's size.

A file that is not such a List (not JSON, no ``items``, or items none of which is a Workload) is a
:class:`~kuota.report.errors.ReportInputError`; a bad item is left out and counted (see ``workload_history``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn, TextIO

from kuota.report.errors import ReportInputError
from kuota.report.sources.quoting import quoted
from kuota.report.sources.workload_history import RetainedWorkloads, WorkloadReader

CHUNK_CHARS = 1 << 20
_WHITESPACE = " \t\n\r"
_NUMBER_CHARACTERS = "0123456789+-.eE"
_HINT = "write it with 'kubectl get workloads.kueue.x-k8s.io -A -o json'"


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


class _Scanner:
    """The file's text through a window that holds one value at a time (plus what is left of a chunk)."""

    def __init__(self, stream: TextIO, source: str, chunk_chars: int) -> None:
        self._stream = stream
        self._chunk_chars = chunk_chars
        self._source = source
        self._buffer = ""
        self._position = 0  # in the buffer
        self._offset = 0  # of the buffer's start in the text
        self._ended = False
        self._decoder = json.JSONDecoder(parse_constant=_refuse_constant)

    def refuse(self, what: str) -> NoReturn:
        raise ReportInputError(
            f"{self._source} is not kubectl's JSON List output: {what} (at character {self._offset + self._position});"
            f" {_HINT}"
        )

    def _more(self) -> bool:
        """Read the next chunk (at least as long as what is kept, so a long item costs linear time)."""
        if self._ended:
            return False
        kept = self._buffer[self._position :]
        try:
            chunk = self._stream.read(max(self._chunk_chars, len(kept)))
        except (OSError, UnicodeDecodeError) as error:
            raise ReportInputError(f"{self._source} cannot be read: {error}") from error
        self._offset += self._position
        self._buffer, self._position = kept + chunk, 0
        self._ended = not chunk
        return bool(chunk)

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end)."""
        while True:
            buffer, position = self._buffer, self._position
            while position < len(buffer) and buffer[position] in _WHITESPACE:
                position += 1
            self._position = position
            if position < len(buffer):
                return buffer[position]
            if not self._more():
                return ""

    def expect(self, characters: str, what: str) -> str:
        found = self.peek()
        if not found or found not in characters:
            self.refuse(f"expected {what}, found {quoted(found) if found else 'the end of the file'}")
        self._position += 1
        return found

    def _may_go_on(self, value: object, end: int) -> bool:
        if end == len(self._buffer):
            return True
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and not self._buffer[end:].strip(_NUMBER_CHARACTERS)

    def value(self) -> object:
        """The next JSON value, decoded; read on until it is whole."""
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buffer, self._position)
            except json.JSONDecodeError as error:
                if self._more():
                    continue
                self._position = error.pos
                self.refuse(f"not JSON ({error.msg})")
            except RecursionError:
                self.refuse("a value nested too deeply")
            except ValueError as error:  # NaN, Infinity, or an integer past int's printing limit
                self.refuse(f"not JSON ({error})")
            # a number that ends the chunk may go on in the next one (``12`` of ``125``, ``1.5`` of ``1.5e3``)
            if self._may_go_on(value, end) and self._more():
                continue
            self._position = end
            return value


def _items(scanner: _Scanner) -> Iterator[object]:
    """The elements of the top-level object's ``items``, one at a time."""
    if scanner.peek() != "{":
        scanner.refuse("the file is not a JSON object")
    scanner.expect("{", "'{'")
    seen_items = False
    if scanner.peek() == "}":
        scanner.expect("}", "'}'")
    else:
        while True:
            if scanner.peek() != '"':
                scanner.refuse("expected a key")
            key = scanner.value()
            scanner.expect(":", "':'")
            if key == "items":
                if seen_items:
                    scanner.refuse("'items' is given twice")
                seen_items = True
                if scanner.peek() != "[":
                    scanner.refuse("'items' is not a list")
                scanner.expect("[", "'['")
                if scanner.peek() == "]":
                    scanner.expect("]", "']'")
                else:
                    while True:
                        yield scanner.value()
                        if scanner.expect(",]", "',' or ']'") == "]":
                            break
            else:
                scanner.value()
            if scanner.expect(",}", "',' or '}'") == "}":
                break
    if scanner.peek():
        scanner.refuse("more after the List's closing '}'")
    if not seen_items:
        scanner.refuse("no 'items' list")


def read_stream(stream: TextIO, source: str, chunk_chars: int = CHUNK_CHARS) -> RetainedWorkloads:
    """The retained Workloads of a dump's text; ``source`` names it in messages (``--workloads PATH``)."""
    reader = WorkloadReader()
    for item in _items(_Scanner(stream, source, chunk_chars)):
        reader.add(item)
    retained = reader.result()
    if retained.items and not reader.workloads_seen:
        raise ReportInputError(f"{source} holds no kueue.x-k8s.io Workload among its {retained.items} items; {_HINT}")
    return retained


def read_dump(path: Path) -> RetainedWorkloads:
    """The retained Workloads of ``--workloads PATH``."""
    source = f"--workloads {path}"
    try:
        # utf-8-sig: a byte order mark, as some Windows tools write, is not a reason to refuse the file
        with path.open(encoding="utf-8-sig", newline="") as stream:
            return read_stream(stream, source)
    except OSError as error:
        raise ReportInputError(f"{source} cannot be read: {error.strerror or error}; {_HINT}") from error
