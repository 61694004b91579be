"""The one reader for every file a command reads: spec, facts, plan, inventory, fleet, raw outputs.

A named file may be anything: a FIFO that never ends, ``/dev/zero``, a directory, a 1 KB YAML
alias bomb, 5000 nested brackets, a NUL byte, a ``!vault`` tag. Every read goes through here and
each of those gives one located line (``file:line:column: problem``) as the caller's
:class:`~provision.errors.ProvisionError` subclass, never a hang or a traceback.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent

from provision import trust
from provision.errors import FactsError, ProvisionError

MAX_BYTES = 4 << 20
"""Largest file read (4 MiB): a fleet of thousands of hosts or a full raw capture is under 1 MiB."""
MAX_DEPTH = 64
"""Deepest nesting of YAML or JSON accepted; every format provision reads is under 10 deep."""
MAX_NODES = 100_000
"""YAML nodes per document once aliases are expanded: a 1 KB alias bomb expands to 10^9; a spec has ~100."""
MAX_DIGITS = 40
"""Longest number (digits, signs, points and exponents) read in YAML or JSON: every figure provision
reads fits in 20 digits (a byte count of a fleet's memory, a 64-bit counter); Python's int() stops
at 4300 digits with a ValueError, and a float of 400 digits overflows arithmetic."""


def read_bytes(
    path: Path,
    *,
    what: str,
    error: type[ProvisionError] = ProvisionError,
    limit: int = MAX_BYTES,
    directory: int | None = None,
    owners: frozenset[int] | None = None,
) -> bytes:
    """The bytes of ``path``, a trusted regular file of at most ``limit`` bytes.

    The path must pass the trust rule (:mod:`provision.trust`: root's or the invoking user's, and
    writable by no one else, from ``/`` down); it is opened without following a link another user
    could have planted and without blocking, and a FIFO or a device is refused, never opened.

    Args:
        directory: A descriptor of ``path``'s directory from :func:`provision.trust.open_directory`
            (a raw directory of many files: one walk for all of them).
        owners: The trusted owners (:func:`provision.trust.trusted_owners`), when the caller reads
            many files under one rule; None: read for this file.

    Raises:
        ProvisionError: ``error`` when the file is missing, not trusted (:func:`untrusted_message`),
            not a regular file, too large or unreadable.
    """
    try:
        if directory is None:
            fd = trust.open_file(path, owners)
        else:
            fd = trust.open_in(directory, str(path.parent), path.name, owners)
    except trust.Missing:
        raise error(f"{path}: no such {what} file") from None
    except trust.NotRegular as exc:
        raise error(f"{path}: not a regular file ({exc.kind}); give the {what} file itself") from None
    except trust.Untrusted as exc:
        raise error(untrusted_message(path, exc, f"the {what} file")) from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} file: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        # os.read sized by fstat: a buffered read(limit + 1) allocated the whole limit for every
        # file, which dominated reading a fleet's thousands of raw files.
        data = os.read(fd, min(info.st_size, limit) + 1)
        while len(data) <= limit and (more := os.read(fd, limit + 1 - len(data))):
            data += more
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise error(f"{path}: larger than {limit // 1024} KiB; not a {what} file")
    return data


def untrusted_message(path: Path | str, exc: trust.Untrusted, what: str) -> str:
    """The one line for a path the trust rule refused: the path given, the part that failed and
    its owner, and where the rule is explained.

    Args:
        what: What the path is for the message (``the spec file``, ``the venv``).
    """
    part = "" if exc.path == str(path) else f"{exc.path}: "
    return (
        f"{path}: refused, {what} is not trusted: {part}{exc.reason} (provision reads, runs and writes as "
        f"root only what root or the invoking user owns and no one else may write: {trust.DOC})"
    )


def read_text(
    path: Path, *, what: str, error: type[ProvisionError] = ProvisionError, label: str | None = None
) -> str:
    """The UTF-8 text of ``path`` (see :func:`read_bytes`), without NUL bytes.

    Raises:
        ProvisionError: ``error`` as :func:`read_bytes`, or the text is not UTF-8 or holds a NUL
            (located ``file:line:column``).
    """
    data = read_bytes(path, what=what, error=error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _position(data[: exc.start].decode("utf-8", "replace"), len(data[: exc.start]))
        raise error(f"{path}:{line}:{col}: not a {label or what} file (not UTF-8 text)") from None
    if (nul := text.find("\0")) >= 0:
        line, col = _position(text, nul)
        raise error(f"{path}:{line}:{col}: not a {label or what} file (NUL byte)")
    return text


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of character ``offset`` of ``text``."""
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def read_json_text(
    path: Path, *, what: str, error: type[ProvisionError] = ProvisionError, label: str | None = None
) -> str:
    """The text of the JSON file ``path`` (see :func:`read_text`), nested at most :data:`MAX_DEPTH`
    deep, its numbers at most :data:`MAX_DIGITS` characters long.

    Raises:
        ProvisionError: ``error`` as :func:`read_text`, or the brackets nest too deep or a number
            is too long (located).
    """
    text = read_text(path, what=what, error=error, label=label)
    if (found := _beyond_limits(text, "[{", "]}")) is not None:
        where, problem = found
        line, col = _position(text, where)
        raise error(f"{path}:{line}:{col}: {problem}; not a {label or what} file")
    return text


def read_json(
    path: Path, *, what: str, error: type[ProvisionError] = ProvisionError, label: str | None = None
) -> Any:
    """The JSON document in ``path`` (see :func:`read_json_text`).

    Raises:
        ProvisionError: ``error`` as :func:`read_json_text`, or the JSON is malformed (located).
    """
    text = read_json_text(path, what=what, error=error, label=label)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}:{exc.lineno}:{exc.colno}: not a {label or what} file ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # bounded above; kept so that no input is a traceback
        raise error(f"{path}: not a {label or what} file ({str(exc).splitlines()[0][:200]})") from None


def _beyond_limits(text: str, openers: str, closers: str) -> tuple[int, str] | None:
    """Where, outside strings, bracket nesting exceeds :data:`MAX_DEPTH` or a number is longer
    than :data:`MAX_DIGITS`, and which; None when neither (one linear pass)."""
    depth, in_string, escaped, number = 0, False, False, 0
    for i, char in enumerate(text):
        if in_string:
            escaped, in_string = (not escaped and char == "\\"), in_string and (escaped or char != '"')
            continue
        number = number + 1 if char in _NUMBER_CHARS else 0
        if number > MAX_DIGITS:
            return i - MAX_DIGITS, f"a number longer than {MAX_DIGITS} characters"
        if char == '"':
            in_string = True
        elif char in openers:
            depth += 1
            if depth > MAX_DEPTH:
                return i, f"nested deeper than {MAX_DEPTH} levels"
        elif char in closers:
            depth -= 1
    return None


_NUMBER_CHARS = frozenset("-+.0123456789eE")


class _BoundedComposer(Composer):
    """ruamel's composer with a budget of aliases and a depth limit, checked while composing.

    Each alias counts as the values it would expand to, before any is expanded, so the 1 KB
    "billion laughs" document fails in microseconds; depth is checked before recursion, so 5000
    brackets fail without a RecursionError.
    """

    def compose_document(self) -> Any:
        self._nodes, self._depth = 0, 0
        self._sizes: dict[int, int] = {}
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        anchored = self.anchors.get(event.anchor) if isinstance(event, AliasEvent) else None
        self._nodes += _expanded_size(anchored, self._sizes) if anchored is not None else 1
        if self._nodes > MAX_NODES:
            raise _LimitError(f"more than {MAX_NODES} values once aliases are expanded", event.start_mark)
        value = getattr(event, "value", None)
        plain = value if isinstance(value, str) and not getattr(event, "style", None) else ""
        if len(plain) > MAX_DIGITS and _YAML_NUMBER.fullmatch(plain):
            raise _LimitError(f"a number longer than {MAX_DIGITS} characters", event.start_mark)
        tag = getattr(event, "tag", None)
        if tag is not None and tag not in _CORE_TAGS:
            raise _LimitError(f"unknown tag {tag} (only plain YAML values are read)", event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _LimitError(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_YAML_NUMBER = re.compile(r"[-+]?(0x[0-9a-fA-F_]+|0o[0-7_]+|([0-9][0-9_]*)?\.?[0-9_]*([eE][-+]?[0-9]+)?)")
"""A plain scalar YAML 1.2's core schema (or ruamel's 1.1 leftovers: ``_``, ``0o``) reads as a number."""


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    """Values ``node`` stands for once every alias in it is expanded (memoised per node)."""
    if id(node) not in sizes:
        children = node.value if isinstance(node.value, list) else []
        flat = [c for child in children for c in (child if isinstance(child, tuple) else (child,))]
        sizes[id(node)] = 1 + sum(_expanded_size(child, sizes) for child in flat)
    return sizes[id(node)]


_CORE_TAGS = frozenset(
    {"!"} | {f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq")}
)
"""Explicit tags accepted: the YAML 1.2 core schema's and the non-specific ``!`` (YAML 1.2.2 §10.3)."""


class _LimitError(MarkedYAMLError):
    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


def yaml_loader(typ: str) -> YAML:
    """A ruamel loader (``"rt"`` keeps line numbers, ``"safe"`` gives plain data) with the limits."""
    yaml = YAML(typ=typ, pure=True)
    yaml.Composer = _BoundedComposer
    return yaml


def is_plan_file(path: Path) -> bool:
    """Whether ``path`` looks like a saved plan (JSON) rather than a spec (YAML)."""
    return path.suffix == ".json"


def parse_yaml(text: str, path: Path, *, error: type[ProvisionError], typ: str = "safe") -> Any:
    """The YAML document ``text`` of ``path``: bounded aliases and depth, unknown tags refused.

    Raises:
        ProvisionError: ``error`` with one ``file:line:column: invalid YAML: problem`` line.
    """
    try:
        return yaml_loader(typ).load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise error(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except YAMLError as exc:
        raise error(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise error(f"{path}: invalid YAML: nested deeper than {MAX_DEPTH} levels") from None


def read_yaml(path: Path, *, what: str, error: type[ProvisionError], typ: str = "safe") -> Any:
    """The YAML document in ``path`` (see :func:`read_text` and :func:`parse_yaml`)."""
    return parse_yaml(read_text(path, what=what, error=error), path, error=error, typ=typ)


def check_inventory(inventory: Path, error: type[ProvisionError] = FactsError) -> None:
    """Refuse, before Ansible or ssh are started, an inventory that is missing, unreadable or that the
    trust rule refuses (Ansible runs an inventory's scripts and its ``ansible_python_interpreter``).

    A file must be a trusted regular file of UTF-8 text (a FIFO, a device or binary data never reaches
    Ansible), and the ``group_vars/`` and ``host_vars/`` beside it trusted trees; a directory (Ansible's
    inventory directory, with its own ``group_vars/``) a trusted tree. The ``ansible.cfg`` that
    Ansible reads in this process (``$ANSIBLE_CONFIG``, the working directory's, ``~/.ansible.cfg``,
    ``/etc/ansible/ansible.cfg``: it names plugin paths) must be trusted too.

    Raises:
        ProvisionError: ``error``: ``<inventory>: no such inventory``, or why it cannot be read or
            is not trusted (one line, naming the part and its owner).
    """
    if not inventory.exists():
        raise error(f"{inventory}: no such inventory")
    if inventory.is_dir():
        check_tree(inventory, "the inventory directory", error)
    else:
        read_text(inventory, what="inventory", error=error, label="text inventory")
        for name in ("group_vars", "host_vars"):
            if (beside := inventory.parent / name).exists():
                check_tree(beside, f"the inventory's {name}", error)
    from ansible.config.manager import find_ini_config_file  # type: ignore[import-untyped]

    if (config := find_ini_config_file()) is not None:
        read_text(Path(config), what="Ansible configuration", error=error)


def check_tree(top: Path, what: str, error: type[ProvisionError] = ProvisionError) -> None:
    """Refuse ``top`` unless it and everything below it pass the trust rule
    (:func:`provision.trust.check_tree`).

    Raises:
        ProvisionError: ``error`` with :func:`untrusted_message`'s one line.
    """
    try:
        trust.check_tree(top)
    except trust.Untrusted as exc:
        raise error(untrusted_message(top, exc, what)) from None
    except OSError as exc:
        raise error(f"{top}: cannot read {what}: {exc.strerror or exc}") from None


def check_directory(directory: Path, what: str, error: type[ProvisionError] = ProvisionError) -> None:
    """Refuse ``directory`` unless the trust rule accepts it as a directory (nothing below it read).

    Raises:
        ProvisionError: ``error`` with :func:`untrusted_message`'s one line.
    """
    try:
        trust.check_path(directory, kind="dir")
    except trust.Untrusted as exc:
        raise error(untrusted_message(directory, exc, what)) from None
    except OSError as exc:
        raise error(f"{directory}: cannot read {what}: {exc.strerror or exc}") from None


Location = tuple[int, int]
"""1-based line and column in a YAML file."""


def plain_data(node: Any) -> Any:
    """Convert ruamel's round-trip containers to dicts and lists for pydantic."""
    if isinstance(node, CommentedMap):
        return {str(k): plain_data(v) for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [plain_data(v) for v in node]
    if hasattr(node, "value") and type(node).__module__.startswith("ruamel"):
        return node.value if not isinstance(node, str) else str(node)
    return node


def locate(data: Any, loc: tuple[Any, ...]) -> Location:
    """Line and column of the deepest node of ``loc`` that exists in the YAML."""
    node, best = data, (1, 1)
    for part in loc:
        if isinstance(node, CommentedMap) and part in node:
            best = key_position(node, part)
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
            line, col = node.lc.item(part)
            best, node = (line + 1, col + 1), node[part]
        else:
            if isinstance(node, (CommentedMap, CommentedSeq)) and best == (1, 1):
                best = (node.lc.line + 1, node.lc.col + 1)
            break
    return best


def key_position(node: CommentedMap, key: Any) -> Location:
    line, col = node.lc.key(key)
    return line + 1, col + 1
