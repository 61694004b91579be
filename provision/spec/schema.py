"""The spec's JSON Schema, as ``provision schema`` prints it and ``specs/spec.schema.json`` ships it.

Pydantic's schema of :class:`Spec`, plus what an editor needs to help: ``$id``, the catalog's GPU
ids as the enum of ``gpus.model``, and examples for every property. Examples are the values the
shipped specs use (so they are valid and real); :data:`EXAMPLES` covers the properties no
shipped spec sets. Shipped specs point their editor at the file with a yaml-language-server
modeline (``# yaml-language-server: $schema=spec.schema.json``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from provision.catalog import Catalog, load_catalog
from provision.catalog.prebuilt import read_data
from provision.resources import data_dir
from provision.spec.loader import load_spec
from provision.spec.models import Spec

SCHEMA_ID = "urn:provision-gpu:spec:1"
"""Names the schema (spec format version 1); a URN, as no URL serves the file."""

BIOS_DEFAULTS = Path(__file__).resolve().parents[1] / "catalog" / "data" / "bios.yaml"
"""The checklist's default items (read as data here; the checklist package renders them)."""

SCHEMA_FILE = "spec.schema.json"
"""The schema's file name beside the shipped specs."""

EXAMPLES: dict[str, list[Any]] = {
    "OsSpec.architecture": ["x86_64", "aarch64"],
    "GpuSpec.max_path": ["PIX", "NODE"],
    "DriverSpec.console": [True],
    "PythonSpec.packages": [["numpy"]],
    "BiosSpec.items": [[]],
    "BiosSpec.skip": [["above-4g-decoding"]],
    "Spec.repository": [None],
    "Spec.bios": [{"skip": ["above-4g-decoding"]}],
    # Thresholds a little under what the lent H200s measured (catalog/data/verify.yaml, sources
    # H200-BENCH and H200X2-VERIFY: 55.3 GB/s pinned copies on Gen5 x16, bf16 783 TFLOP/s,
    # P2P 385 GB/s, all-reduce busbw 298 GB/s); the GPU limit stays under its T.Limit.
    "VerifySpec.min_h2d_gbps": [50.0],
    "VerifySpec.min_d2h_gbps": [50.0],
    "VerifySpec.min_bf16_tflops": [700.0],
    "VerifySpec.min_p2p_gbps": [350.0],
    "VerifySpec.min_allreduce_busbw_gbps": [250.0],
    "VerifySpec.max_gpu_temp_c": [85.0],
    "VerifySpec.pcie_gen": [5],
    "VerifySpec.pcie_width": [16],
    "VerifySpec.load_seconds": [5.0],
    "VerifySpec.allreduce_timeout_s": [90.0],
}
"""Examples for the properties no shipped spec sets (more come from the catalog: :func:`_from_catalog`)."""


def spec_schema(catalog: Catalog | None = None, specs_dir: Path | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a spec file, with GPU ids, examples and ``$id``."""
    cat = catalog or load_catalog()
    schema = Spec.model_json_schema()
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID} | schema
    gpu_model = schema["$defs"]["GpuSpec"]["properties"]["model"]
    gpu_model["enum"] = list(cat.gpus)
    shipped = shipped_examples(specs_dir or data_dir("specs"))
    known = EXAMPLES | _from_catalog(cat)
    for where, prop in properties(schema):
        found = shipped.get(where) or known.get(where)
        if found:
            prop["examples"] = found
    return schema


def _from_catalog(cat: Catalog) -> dict[str, list[Any]]:
    """Examples read from the catalog: NVIDIA's repository (a mirror repeats it) and a BIOS item."""
    examples: dict[str, list[Any]] = {
        "GpuSpec.model": list(cat.gpus)[:3],
        "PythonSpec.index_url": [cat.index_url("cu130")],
    }
    if repo := cat.repository("ubuntu2404"):
        examples |= {
            "RepositorySpec.url": [repo.url],
            "RepositorySpec.key_url": [repo.key_url],
            "RepositorySpec.fingerprint": [repo.fingerprint],
        }
    items = read_data(BIOS_DEFAULTS)["items"]
    examples |= {f"BiosItem.{key}": [items[0][key]] for key in ("id", "title", "why", "how")}
    return examples


def properties(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property as ``(Model.field, its schema)``, the top-level Spec's included."""
    for name, model in [("Spec", schema), *schema.get("$defs", {}).items()]:
        for field, prop in model.get("properties", {}).items():
            yield f"{name}.{field}", prop


def shipped_examples(specs_dir: Path) -> dict[str, list[Any]]:
    """The distinct values shipped specs give each property, in file order."""
    found: dict[str, list[Any]] = {}
    for path in sorted(specs_dir.glob("*.yaml")):  # not examples/: those are refused on purpose
        spec = load_spec(path)
        _collect(spec.model_dump(mode="json", exclude_unset=True), "Spec", found)
    return found


_NESTED = {
    "os": "OsSpec",
    "gpus": "GpuSpec",
    "driver": "DriverSpec",
    "cuda": "CudaSpec",
    "python": "PythonSpec",
    "repository": "RepositorySpec",
    "bios": "BiosSpec",
    "verify": "VerifySpec",
    "monitoring": "MonitoringSpec",
}


def _collect(data: dict[str, Any], model: str, found: dict[str, list[Any]]) -> None:
    for field, value in data.items():
        seen = found.setdefault(f"{model}.{field}", [])
        if value not in seen:
            seen.append(value)
        if model == "Spec" and field in _NESTED and isinstance(value, dict):
            _collect(value, _NESTED[field], found)
