"""Everything an OS family's tools are is in ``provision/os/``: no command line, probe command or
on-target path of apt, dpkg, dnf or rpm (nor their automatic-upgrade and initramfs tools) appears in
code elsewhere in ``provision/``. Docstrings and comments may name them (they explain); string
constants in code may not (they would run, or be printed as advice, on a family they do not fit).
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "provision"
TOOLS = (
    "apt-get|apt-cache|apt-mark|apt|dpkg-query|dpkg|dnf|yum|rpm|rpmkeys|unattended-upgrade|dnf-automatic"
    "|update-initramfs|dracut"
)
COMMAND = re.compile(
    rf"(?<![\w./-])({TOOLS})\s+(-{{1,2}}[A-Za-z]|install\b|remove\b|purge\b|policy\b|madison\b|hold\b|"
    r"unhold\b|module\b|versionlock\b|upgrade\b|reinstall\b|makecache\b|list\b|query\b|check-update\b)"
)
"""A tool followed by an option or a subcommand: command text, not a word in a sentence."""
PATHS = re.compile(r"/etc/apt/|/var/lib/dpkg|/etc/dnf/|/etc/yum|/var/lib/rpm|/usr/bin/(apt|dpkg|dnf|rpm)")
NAME = re.compile(rf"^({TOOLS})$")
"""A string that is only the tool's name (an argv's first word, a probe's ``requires``)."""


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of docstring constants: a body's first string, and the string after an assignment."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            found.add(id(body[0].value))
        for first, second in itertools.pairwise(body):
            after = isinstance(first, ast.Assign | ast.AnnAssign) and isinstance(second, ast.Expr)
            if after and isinstance(second.value, ast.Constant):
                found.add(id(second.value))
    return found


def _type_words(tree: ast.AST) -> set[int]:
    """ids of the strings inside ``Literal[...]``: allowed values (``"deb"``, ``"rpm"``), not text."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "Literal":
            found |= {id(n) for n in ast.walk(node.slice) if isinstance(n, ast.Constant)}
    return found


def offences(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each string constant in code that is apt/dpkg/dnf/rpm command text."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _type_words(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
            if COMMAND.search(text) or PATHS.search(text) or NAME.match(text.strip()):
                yield node.lineno, text


def test_the_reader_finds_command_text_and_passes_prose() -> None:
    code = (
        'X = "run apt-get install --reinstall foo"\nY = ("dpkg-query", "-W")\nZ = "/etc/apt/sources.list.d"\n'
        'W = f"{n} held; apt pins in place"\ndef f():\n    """apt-get install x."""\n'
    )
    assert sorted({line for line, _ in offences(code)}) == [1, 2, 3]


def test_no_package_manager_command_text_outside_provision_os() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "os"
        for line, text in offences(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "\n".join(found)
