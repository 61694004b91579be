"""Every source the product prints, ships or documents is something a user can open.

A source is a public URL, a named public document (title and publisher), or a document in this
repository (``docs/...``, ``FF-NN`` = ``docs/field-failures.md#ff-NN``). Nothing may point to the
developers' reference folder (``../shared``) or name its files: not the product, and not the
tests, benchmarks and CI scripts either (the sdist ships ``tests/``; a clone holds them all).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from provision.fieldfailures import FIELD_FAILURES_DOC, ff_ref

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("provision", "playbooks", "templates", "specs", "docs", "README.md")
DEVELOPER_SCANNED = ("tests", "benchmarks", ".ci", "pyproject.toml")
"""Shipped in the sdist or run by CI but never printed: held to the same no-pointer rule, every file
whatever its suffix (fixtures are ``.txt``, ``.json``, ``.xml``, ``.Packages``, ...)."""
THIS_FILE = Path(__file__).resolve()
"""The one file left out of the developer scan: it must spell out the patterns it forbids."""
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".md", ".j2", ".txt", ".json", ".cfg", ".ini", ".toml", ".sh", ""}
DATA = ROOT / "provision" / "catalog" / "data"

FORBIDDEN = {
    "the developers' reference folder": re.compile(
        # written as a path, built as one (ROOT.parent / "shared", Path("..", "shared")), or named
        r"\bshared/|\.\./shared\b"
        r"|(\.parents?(\[\d+\])?|[\"']\.\.[\"'])\s*[/,]\s*[\"']shared[\"']"
        r"|\bshared (folder|fixtures?|reference)\b"
    ),
    "a reference document not in the repository": re.compile(
        r"(?<![\w/-])(compat|peers|measurements|harness|new-components|field-failures)\.md"
        r"|(?<![\w./-])reference/[\w-]+\.md"
    ),
    "a section of the compatibility notes": re.compile(r"\bcompat (§|section )?\d"),
    "the seed articles": re.compile(r"\bseed[- ]articles?\b|\bseeds\b", re.IGNORECASE),
    "a private tag": re.compile(r"\b(H200-RUN|H200X2-RUN|SEED-HBM)\b"),
}
"""Patterns a shipped or printed text must not contain (``field-failures.md`` only as ``docs/...``)."""

AWAITING_REWRITE: dict[str, set[str]] = {}
"""Known offenders outside this change's reach, by file and pattern name."""

FF_MENTION = re.compile(r"\bFF-(\d\d)\b")
DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]*[\w/](?:#[\w-]+)?")
URL = re.compile(r"https?://\S+")
BARE_TAG = re.compile(r"^[A-Z0-9][A-Z0-9-]*$")


def _files() -> Iterator[Path]:
    for name in SCANNED:
        path = ROOT / name
        paths = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in paths:
            if p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts:
                yield p


def _developer_files() -> Iterator[Path]:
    """Every file of :data:`DEVELOPER_SCANNED` but this one and Python's bytecode caches."""
    for name in DEVELOPER_SCANNED:
        path = ROOT / name
        paths = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        yield from (p for p in paths if "__pycache__" not in p.parts and p.resolve() != THIS_FILE)


def _offences(paths: Iterator[Path], allowed: dict[str, set[str]]) -> list[str]:
    """``file:line: what: text`` for each line of ``paths`` that matches a :data:`FORBIDDEN` pattern."""
    offences = []
    for path in paths:
        skip = allowed.get(_rel(path), set())
        for number, line in enumerate(_text(path).splitlines(), start=1):
            offences += [
                f"{_rel(path)}:{number}: {what}: {line.strip()[:100]}"
                for what, pattern in FORBIDDEN.items()
                if what not in skip and pattern.search(line)
            ]
    return offences


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.as_posix()


@cache
def _anchors(doc: Path) -> frozenset[str]:
    """Explicit ``<a id>`` anchors and GitHub heading slugs of a Markdown file."""
    text = _text(doc)
    ids = set(re.findall(r'<a id="([\w-]+)"', text))
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE):
        ids.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return frozenset(ids)


def _docs_ref_problem(ref: str) -> str | None:
    """None when ``docs/x[#anchor]`` exists (anchors checked in Markdown), else why not."""
    path, _, anchor = ref.partition("#")
    target = ROOT / path.rstrip(".")
    if not target.exists():
        return f"{ref}: no such file in the repository"
    if anchor and target.suffix == ".md" and anchor not in _anchors(target):
        return f"{ref}: no anchor #{anchor} in {path}"
    return None


def test_the_scan_sees_the_product() -> None:
    names = {_rel(p) for p in _files()}
    assert {"README.md", "docs/field-failures.md", "provision/catalog/data/verify.yaml"} <= names
    assert any(n.startswith("templates/") for n in names) and any(n.startswith("playbooks/") for n in names)


def test_nothing_points_outside_the_repository() -> None:
    offences = _offences(_files(), AWAITING_REWRITE)
    assert not offences, "\n".join(offences)


def test_the_developer_scan_sees_tests_benchmarks_and_ci() -> None:
    names = {_rel(p) for p in _developer_files()}
    assert {
        "pyproject.toml",
        ".ci/lint",
        "tests/unit/factories.py",
        "tests/integration/harness/packages.py",
        "tests/fixtures/raw/h200-ubuntu2404-2026-12-01/dpkg-nvidia.txt",
    } <= names
    assert any(n.startswith("benchmarks/") for n in names)
    assert _rel(THIS_FILE) not in names and not any("__pycache__" in n for n in names)


def test_tests_benchmarks_and_ci_point_nowhere_outside_the_repository() -> None:
    offences = _offences(_developer_files(), {})
    assert not offences, "\n".join(offences)


def test_the_developer_scan_catches_each_kind_of_pointer(tmp_path: Path) -> None:
    folder = "the developers' reference folder"
    cases = [
        (folder, 'SHARED = ROOT.parent / "shared" / "fixtures" / "h200-ubuntu2404"'),
        (folder, 'os.path.join("..", "shared", "reference")'),
        (folder, "# The same capture in the workspace's shared folder"),
        (folder, "it comes from (fixture = /work/shared/fixtures/h200-ubuntu2404/dpkg-nvidia.txt)"),
        ("a reference document not in the repository", "(compat.md = the compatibility notes)"),
        ("a reference document not in the repository", "see reference/harness.md, Pitfalls"),
        ("a section of the compatibility notes", '(compat §4c "Branch >= 580")'),
        ("the seed articles", "as the seed articles say"),
        ("a private tag", "measured in H200-RUN"),
    ]
    for number, (what, line) in enumerate(cases):
        path = tmp_path / f"case{number}.py"
        path.write_text(f'"""Docstring."""\n{line}\n', encoding="utf-8")
        found = [o for o in _offences(iter([path]), {}) if o.split(": ", 2)[1] == what]
        assert found, (what, line)
    # A directory a test makes and happens to call "shared" is no pointer (tests/unit/test_trust.py).
    assert not _offences(iter([ROOT / "tests" / "unit" / "test_trust.py"]), {})


def test_every_field_failure_mentioned_has_an_entry() -> None:
    anchors = _anchors(ROOT / FIELD_FAILURES_DOC)
    missing = sorted(
        f"{_rel(path)}: FF-{n}"
        for path in _files()
        for n in set(FF_MENTION.findall(_text(path)))
        if f"ff-{n}" not in anchors
    )
    assert not missing, "\n".join(missing)


def test_field_failures_doc_has_all_sixteen_with_public_sources() -> None:
    text = _text(ROOT / FIELD_FAILURES_DOC)
    entries = re.split(r'^<a id="ff-\d\d"></a>$', text, flags=re.MULTILINE)[1:]
    assert len(entries) == 16
    for number, entry in enumerate(entries, start=1):
        assert entry.lstrip().startswith(f"## FF-{number:02d}: "), entry[:40]
        assert "**What goes wrong.**" in entry and "**What provision does.**" in entry, number
        sources = entry.split("**Sources.**", 1)[1]
        assert URL.search(sources), f"FF-{number:02d} names no public URL"


def test_ff_ref_points_at_the_entries() -> None:
    assert ff_ref(1) == "docs/field-failures.md#ff-01"
    assert ff_ref(6, 7) == "docs/field-failures.md#ff-06, docs/field-failures.md#ff-07"
    assert _docs_ref_problem(ff_ref(16)) is None
    with pytest.raises(ValueError, match="FF-01 to FF-16"):
        ff_ref(17)


def test_every_docs_path_cited_exists() -> None:
    problems = sorted(
        f"{_rel(path)}: {problem}"
        for path in (*_files(), *_developer_files())
        for ref in set(DOCS_PATH.findall(_text(path)))
        if (problem := _docs_ref_problem(ref)) is not None
    )
    assert not problems, "\n".join(problems)


def _yaml(name: str) -> object:
    return YAML(typ="safe", pure=True).load((DATA / name).read_text(encoding="utf-8"))


def _openable(text: str) -> str | None:
    """None when ``text`` is a URL, an existing repository path, or names a document; else why not."""
    text = text.strip()
    if URL.fullmatch(text):
        return None
    if re.fullmatch(r"[\w.-]+(/[\w.-]+)+(#[\w-]+)?", text):
        return (
            _docs_ref_problem(text)
            if text.startswith("docs/")
            else (None if (ROOT / text.partition("#")[0]).exists() else f"{text}: no such file")
        )
    if BARE_TAG.fullmatch(text) or len(text) < 12:
        return f"{text!r}: a tag, not a document a user can open"
    return None


def test_catalog_source_keys_name_openable_documents() -> None:
    data = _yaml("sources.yaml")
    assert isinstance(data, dict)
    for key, source in data["sources"].items():
        url, cite = source.get("url"), source["cite"]
        assert url is None or URL.fullmatch(url), (key, url)
        assert url is not None or _openable(cite) is None, (key, cite)
        for ref in DOCS_PATH.findall(cite):
            assert _docs_ref_problem(ref) is None, (key, ref)


def test_verify_threshold_sources_print_openable_refs() -> None:
    data = _yaml("verify.yaml")
    assert isinstance(data, dict)
    for key, source in data["sources"].items():
        assert _openable(source["ref"]) is None, (key, _openable(source["ref"]))


def test_checklist_sources_are_documents_not_tags() -> None:
    data = _yaml("bios.yaml")
    assert isinstance(data, dict)
    for item in data["items"]:
        source = " ".join(item["source"].split())
        assert _openable(source) is None, (item["id"], source)
        for n in FF_MENTION.findall(source):
            assert f"docs/field-failures.md#ff-{n}" in source, (item["id"], f"FF-{n} without its link")


def _inline_comments(node: object, lines: list[str]) -> Iterator[tuple[int, str]]:
    """(line, comment) of every comment that follows a value on its own line, in a round-trip tree."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if not isinstance(node, (CommentedMap, CommentedSeq)):
        return
    for entry in node.ca.items.values():
        for token in (t for slot in entry for t in (slot if isinstance(slot, list) else [slot])):
            mark = getattr(token, "start_mark", None)
            inline = mark is not None and lines[mark.line][: mark.column].strip()
            if inline and token.value.lstrip(" ").startswith("#"):
                yield mark.line + 1, token.value.splitlines()[0]
    for child in node.values() if isinstance(node, CommentedMap) else node:
        yield from _inline_comments(child, lines)


@pytest.mark.parametrize("path", sorted(DATA.rglob("*.yaml")), ids=lambda p: p.name)
def test_no_catalog_value_is_cut_short_by_a_comment(path: Path) -> None:
    # YAML reads " #" after a plain value as a comment: "PR #4110 (...)" unquoted became "PR", and
    # the catalog cited it so. Catalog files keep their comments on lines of their own.
    text = path.read_text(encoding="utf-8")
    tree = YAML(typ="rt").load(text)
    assert list(_inline_comments(tree, text.splitlines())) == []
