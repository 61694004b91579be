"""The validated catalog, pickled at build time, so that start-up builds no catalog validator.

Validating the assembled catalog (``prebuilt.json``) still makes pydantic build the validators of
~45 model classes, ~25 ms of every command's start-up on the 2-core build machine (~40 ms on the
H200); unpickling the catalog those same models made takes ~3 ms (``benchmarks/bench_startup.py``).

Trust: the pickle is as trusted as the package's code, and checked before it is read:

- its SHA-256 is in :mod:`provision.catalog.snapshot_key`, a Python module written beside it, so
  changing the pickle without the package's code is refused (as is a torn or truncated file);
- it is unpickled by a restricted unpickler (Python's "Restricting Globals" pattern,
  https://docs.python.org/3/library/pickle.html#restricting-globals) that resolves only classes
  defined in the modules the catalog is made of (no dotted name, no imported class), never a
  function such as ``os.system``;
- it is used only while its key matches: the SHA-256 over the catalog files
  (:func:`~provision.catalog.prebuilt.files_digest`, so an edited data directory is validated
  from its files), over the source of the project's modules whose classes it holds and of every
  project module those import (:func:`source_modules`: a changed model, base class, validator or
  default is never filled from an old pickle), and pydantic's major version (``__setstate__``'s
  state layout). Versions are pickled as their text (``Version("2.11.0")``), not their internals,
  so the installed ``packaging`` does not matter.

Anything else falls back to validating ``prebuilt.json``; a stale snapshot costs time, never
correctness. ``tests/unit/test_prebuilt.py`` fails while the snapshot disagrees with the YAML.
Regenerate with ``python3 -m provision.regenerate``. Nothing is written anywhere else.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision.catalog.prebuilt import DATA_DIR

if TYPE_CHECKING:
    from provision.catalog.catalog import Catalog

PICKLE = DATA_DIR / "catalog.pickle"
KEY_MODULE = Path(__file__).resolve().parent / "snapshot_key.py"
PROTOCOL = 5

_BUILTINS = frozenset({"copyreg", "builtins"})


class _Pickler(pickle.Pickler):
    """Pickles ``packaging`` versions as their text: ``Version("2.11.0")`` rebuilt by its constructor."""

    def reducer_override(self, obj: Any) -> Any:
        from packaging.version import Version

        if type(obj) is Version:
            return (Version, (str(obj),))
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    """Resolves classes defined in ``modules`` only: never a function, nothing of ``builtins``,
    no dotted name (protocol 4 resolves ``a.b.c`` attribute by attribute, which reaches other
    modules' classes such as ``functools.partial`` or ``type``), no class a module imported."""

    def __init__(self, data: bytes, modules: frozenset[str]) -> None:
        super().__init__(io.BytesIO(data))
        self._modules = modules

    def find_class(self, module: str, name: str) -> Any:
        if module in self._modules and module not in _BUILTINS and "." not in name:
            found = super().find_class(module, name)
            if isinstance(found, type) and (found.__module__, found.__qualname__) == (module, name):
                return found
        raise pickle.UnpicklingError(f"global {module}.{name} is not a catalog class")


def dumps(catalog: Catalog) -> bytes:
    """The pickle of ``catalog`` (protocol 5, versions as text).

    Not byte-stable across processes (pydantic keeps each model's set fields as a ``set``, whose
    order follows string hashing), so :mod:`provision.catalog.regenerate` keeps a snapshot that
    still loads to the same catalog instead of rewriting it."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=PROTOCOL).dump(catalog)
    return buffer.getvalue()


def modules_in(data: bytes) -> tuple[str, ...]:
    """The modules whose globals the pickle ``data`` names, sorted.

    Raises:
        pickle.UnpicklingError: Not a pickle this module wrote.
    """
    found: set[str] = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            found.add(module)
            return super().find_class(module, name)

    Recorder(io.BytesIO(data)).load()
    return tuple(sorted(found - _BUILTINS))


def _origin(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None else None


def _source(name: str) -> bytes | None:
    """The source file of module ``name``, or None when it has none readable (a zip, only ``.pyc``)."""
    origin = _origin(name)
    if origin is None or not origin.endswith(".py"):
        return None
    try:
        return Path(origin).read_bytes()
    except OSError:
        return None


def source_modules(modules: tuple[str, ...]) -> tuple[str, ...]:
    """The ``provision`` modules that shape the classes of ``modules``, sorted: those among them
    and every ``provision`` module their source imports, transitively (a base class such as
    :class:`provision.models.Frozen`, a validator, a type or a default defined elsewhere).
    Imports are read from the source (:mod:`ast`), not executed; a module without readable source
    is kept (then :func:`source_digest` is None and the snapshot is not used). The loader that
    assembled the catalog is not among them: like ``prebuilt.json``, the snapshot is its output,
    checked by ``tests/unit/test_prebuilt.py``."""
    import ast  # only when the key is written

    found: set[str] = set()
    todo = [m for m in modules if m.split(".")[0] == "provision"]
    while todo:
        name = todo.pop()
        if name in found or name == __name__ + "_key":  # the key cannot hash itself
            continue
        found.add(name)
        raw = _source(name)
        if raw is None:
            continue
        package = name if Path(_origin(name) or "").name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(raw)):
            if isinstance(node, ast.Import):
                todo.extend(a.name for a in node.names if a.name.split(".")[0] == "provision")
            elif isinstance(node, ast.ImportFrom):
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                if base.split(".")[0] != "provision":
                    continue
                todo.append(base)
                todo.extend(f"{base}.{a.name}" for a in node.names if _source(f"{base}.{a.name}") is not None)
    return tuple(sorted(found))


def source_digest(modules: tuple[str, ...]) -> str | None:
    """SHA-256 over the source files of the ``provision`` modules among ``modules`` (name and
    content), or None when one has no readable source (then the snapshot is not used)."""
    digest = hashlib.sha256()
    for name in modules:
        if name.split(".")[0] != "provision":
            continue
        raw = _source(name)
        if raw is None:
            return None
        digest.update(f"{name}\0{hashlib.sha256(raw).hexdigest()}\n".encode())
    return digest.hexdigest()


def pydantic_major() -> str:
    """Pydantic's major version (its pickled state layout is stable within one)."""
    from pydantic import VERSION

    return VERSION.split(".")[0]


def key_text(files_digest: str, data: bytes) -> str:
    """The text of :mod:`provision.catalog.snapshot_key` for the pickle ``data`` of files ``files_digest``."""
    modules = modules_in(data)
    sources = source_modules(modules)
    if (digest := source_digest(sources)) is None:
        raise ValueError(f"no readable source for one of {', '.join(sources)}: no snapshot key")
    listed = "".join(f"    {json.dumps(m)},\n" for m in modules)
    hashed = "".join(f"    {json.dumps(m)},\n" for m in sources)
    return (
        '"""The key of ``data/catalog.pickle`` (see :mod:`provision.catalog.snapshot`).\n\n'
        "Generated by ``python3 -m provision.regenerate``; do not edit.\n"
        '"""\n\n'
        f"PICKLE_SHA256 = {json.dumps(hashlib.sha256(data).hexdigest())}\n"
        f"FILES_SHA256 = {json.dumps(files_digest)}\n"
        f"MODULES = (\n{listed})\n"
        f"SOURCES = (\n{hashed})\n"
        f"SOURCES_SHA256 = {json.dumps(digest)}\n"
        f"PYDANTIC_MAJOR = {json.dumps(pydantic_major())}\n"
    )


def load(files_digest: str) -> Catalog | None:
    """The pickled catalog when its key matches ``files_digest`` and the code that reads it, else None.

    Never raises: a missing, changed, stale or unreadable snapshot is None.
    """
    key = _key()
    if key is None or files_digest != key["FILES_SHA256"] or pydantic_major() != key["PYDANTIC_MAJOR"]:
        return None
    if source_digest(key["SOURCES"]) != key["SOURCES_SHA256"]:
        return None
    try:
        data = PICKLE.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != key["PICKLE_SHA256"]:
        return None
    from provision.catalog.catalog import Catalog

    try:
        catalog = _Unpickler(data, frozenset(key["MODULES"])).load()
    except Exception:
        return None
    return catalog if type(catalog) is Catalog else None


_TEXT_KEYS = ("PICKLE_SHA256", "FILES_SHA256", "SOURCES_SHA256", "PYDANTIC_MAJOR")


def _key() -> dict[str, Any] | None:
    """The values of :mod:`provision.catalog.snapshot_key`, or None when it is missing, does not
    import (a torn write: a ``SyntaxError``) or lacks a value (one of an older layout)."""
    try:
        module = importlib.import_module(__name__ + "_key")
    except Exception:
        return None
    values: dict[str, Any] = {name: getattr(module, name, None) for name in _TEXT_KEYS}
    for name in ("MODULES", "SOURCES"):
        listed = getattr(module, name, None)
        if not isinstance(listed, tuple) or not all(isinstance(m, str) for m in listed):
            return None
        values[name] = listed
    return values if all(isinstance(values[name], str) for name in _TEXT_KEYS) else None
