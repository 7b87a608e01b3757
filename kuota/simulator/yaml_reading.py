"""YAML read within bounds: PyYAML's safe loader, counting what every alias stands for.

PyYAML composes an alias as a second reference to its anchor's node, so a few hundred bytes of anchors that
each repeat the one before ("billion laughs") decode to a structure of billions of elements: cheap to hold,
since the copies are shared, but every reader after the parser (the object decoder, an error message quoting a
value) walks them one by one. This loader counts each document's nodes and scalar characters as they would be
with every alias expanded and refuses the CONFIG as soon as it goes beyond ``MAX_YAML_NODES`` or
``MAX_YAML_CHARACTERS``, before anything walks it; it also refuses nesting deeper than ``MAX_YAML_DEPTH`` (the
composer recurses), recursive aliases, a key given twice in one mapping (as kubectl does), integers longer
than ``_MAX_INTEGER_LENGTH`` characters (base-60 integers cost quadratic time), and ``.nan``/``.inf``, which no
Kubernetes object can hold. Every failure is a :class:`ConfigFileError` naming the file, the document and the
line.

Not compiled with mypyc: it subclasses PyYAML's (non-native) loader classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kuota.simulator.errors import ConfigFileError
from kuota.simulator.limits import MAX_YAML_CHARACTERS, MAX_YAML_DEPTH, MAX_YAML_NODES

_MAX_INTEGER_LENGTH = 64
_MERGE_TAG = "tag:yaml.org,2002:merge"
_LONGEST_DETAIL = 160
# What PyYAML's constructors raise, besides their own errors, for a scalar they cannot read (``!!int abc``,
# ``!!bool maybe``, ``!!timestamp never``, a date of month 13).
_CONSTRUCTOR_FAILURES = (ValueError, TypeError, KeyError, AttributeError, OverflowError, IndexError)


@dataclass(slots=True)
class ExpansionBudget:
    """What is left for the rest of a CONFIG, all its files and documents together, aliases expanded."""

    nodes: int = MAX_YAML_NODES
    characters: int = MAX_YAML_CHARACTERS


def load_documents(text: str, source: str, budget: ExpansionBudget) -> list[object]:
    """Every document of ``text`` (empty ones as None), charging ``budget``; ``source`` names the file."""
    try:
        loader = _BoundedLoader(text, source, budget)
    except yaml.YAMLError as error:  # the reader checks every character before anything else
        raise ConfigFileError(f"{source}: not valid YAML: {describe(error, text)}") from error
    try:
        documents: list[object] = []
        while loader.check_data():  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
            documents.append(loader.get_data())
        return documents
    except ConstructorError as error:  # well-formed YAML, but a value no Kubernetes object holds
        raise ConfigFileError(f"{source}: a value cannot be read: {describe(error, text)}") from error
    except yaml.YAMLError as error:
        raise ConfigFileError(f"{source}: not valid YAML: {describe(error, text)}") from error
    finally:
        loader.dispose()


def describe(error: yaml.YAMLError, text: str) -> str:
    """PyYAML's complaint in one short line: the problem and where, then what it was reading (PyYAML's own
    text spans several lines and quotes the file)."""
    if isinstance(error, yaml.MarkedYAMLError):
        parts = [f"{error.problem}{_at(error.problem_mark)}"] if error.problem else []
        if error.context:
            parts.append(f"{error.context}{_at(error.context_mark)}")
        detail = "; ".join(parts) or type(error).__name__
    elif isinstance(error, yaml.reader.ReaderError):
        line = text.count("\n", 0, int(error.position)) + 1
        character = chr(error.character) if isinstance(error.character, int) else error.character
        detail = f"character {character!r} at line {line}: {error.reason}"
    else:
        detail = str(error)
    detail = " ".join(detail.split())
    return detail if len(detail) <= _LONGEST_DETAIL else f"{detail[: _LONGEST_DETAIL - 3]}..."


def _at(mark: yaml.Mark | None) -> str:
    return "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, text: str, source: str, budget: ExpansionBudget) -> None:
        super().__init__(text)
        self.name = source  # the marks in PyYAML's errors name the file
        self._source = source
        self._budget = budget
        self._document = 0
        self._depth = 0
        self._merging = 0
        # (nodes, characters) under each node composed in this document, aliases expanded; keyed by id, as the
        # nodes live until the document is done.
        self._sizes: dict[int, tuple[int, int]] = {}

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # The scanner reads ahead of the composer while a [ or { may still start a key, checking every open one
        # at each token: cut nesting short here, before that costs a quadratic read-ahead.
        if self.flow_level >= MAX_YAML_DEPTH:
            raise ConfigFileError(
                f"{self._source}: line {int(self.line) + 1}: flow collections ([ or {{) nested deeper than "
                f"{MAX_YAML_DEPTH} levels"
            )
        super().fetch_flow_collection_start(token_class)

    def compose_document(self) -> Node | None:
        self._document += 1
        self._sizes = {}
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        line = int(self.peek_event().start_mark.line) + 1  # type: ignore[no-untyped-call]  # as check_data
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node)) if node is not None else (0, 0)
            if size is None:
                raise self._refusal(line, "an alias refers to a node it is inside of (a recursive structure)")
            self._charge(line, size)
            return node
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise self._refusal(line, f"nested deeper than {MAX_YAML_DEPTH} levels")
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        own = (1, len(node.value)) if isinstance(node, ScalarNode) else (1, 0)
        self._charge(line, own)
        nodes, characters = own
        for child in self._children(node):
            child_nodes, child_characters = self._sizes[id(child)]
            nodes += child_nodes
            characters += child_characters
        self._sizes[id(node)] = (nodes, characters)
        return node

    def _children(self, node: Node) -> list[Node]:
        if isinstance(node, SequenceNode):
            return list(node.value)
        if not isinstance(node, MappingNode):
            return []
        keys: set[tuple[str, str]] = set()
        children: list[Node] = []
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.tag != _MERGE_TAG:
                if (key.tag, key.value) in keys:
                    given_twice = f"the key {_brief(key.value)} is given twice in one mapping"
                    raise self._refusal(key.start_mark.line + 1, given_twice)
                keys.add((key.tag, key.value))
            children += (key, value)
        return children

    def _charge(self, line: int, size: tuple[int, int]) -> None:
        self._budget.nodes -= size[0]
        self._budget.characters -= size[1]
        if self._budget.nodes < 0 or self._budget.characters < 0:
            raise self._refusal(
                line,
                f"the CONFIG comes to more than {MAX_YAML_NODES} YAML nodes or {MAX_YAML_CHARACTERS} characters "
                "with its aliases (*name) expanded; a queue config is far smaller: repeat fewer anchors",
            )

    def flatten_mapping(self, node: MappingNode) -> None:
        # Merge keys (<<: *anchor) are flattened recursively, one level per merge in a chain.
        self._merging += 1
        try:
            if self._merging > MAX_YAML_DEPTH:
                raise self._refusal(node.start_mark.line + 1, f"merge keys (<<) chained deeper than {MAX_YAML_DEPTH}")
            super().flatten_mapping(node)
        finally:
            self._merging -= 1

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except _CONSTRUCTOR_FAILURES as error:
            raise ConstructorError(
                None, None, f"cannot read {_brief(node.value)} as {node.tag}: {error}", node.start_mark
            ) from error

    def construct_yaml_int(self, node: ScalarNode) -> int:
        if len(node.value) > _MAX_INTEGER_LENGTH:
            raise ConstructorError(
                None, None, f"an integer of more than {_MAX_INTEGER_LENGTH} characters", node.start_mark
            )
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            not_finite = f"{_brief(node.value)} is not a finite number; Kubernetes objects hold none"
            raise ConstructorError(None, None, not_finite, node.start_mark)
        return value

    def _refusal(self, line: int, problem: str) -> ConfigFileError:
        return ConfigFileError(f"{self._source} (document {self._document}) line {line}: {problem}")


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_yaml_float)


def _brief(value: object) -> str:
    shown = repr(value) if isinstance(value, str) else f"a {type(value).__name__}"
    return shown if len(shown) <= 40 else f"{shown[:30]}...'"
