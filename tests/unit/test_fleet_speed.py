"""The shortcuts of the offline fleet plan (issue 31) give what the plain forms give: each is checked
here against the plain form it replaced, on generated text and on the captures."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from provision.detect.domains.gpu import _fabric, _section_total
from provision.detect.domains.gpu_state import field, search_from
from provision.detect.facts import Facts
from provision.detect.raw import parse_raw, printable, read_raw
from provision.detect.runner import facts_from_raw
from provision.errors import FactsError

ROOT = Path(__file__).resolve().parents[2]
H200_RAW = ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec"
_EXIT = re.compile(r"^\[exit (-?\d+)\]$")


def plain_parse_raw(text: str) -> tuple[str, str, int] | None:
    """The line-splitting reader parse_raw replaced: (command, output, rc), None when refused; both
    made printable as every ProbeOutput is."""
    lines = text.rstrip("\n").split("\n")
    while len(lines) > 1 and lines[0].startswith("#"):
        lines = lines[1:]
    match = _EXIT.match(lines[-1].strip()) if len(lines) >= 2 else None
    if not lines[0].startswith("$") or match is None:
        return None
    body = lines[1:-1]
    output = "\n".join(body) + "\n" if body else ""
    return printable(lines[0][1:].strip()), printable(output), int(match.group(1))


def fast_parse_raw(text: str) -> tuple[str, str, int] | None:
    try:
        out = parse_raw(text)
    except FactsError:
        return None
    return out.command, out.output, out.rc


raw_texts = st.lists(
    st.sampled_from(
        ["$ ", "$ cmd", "#", "# note", "\n", "[exit 0]", "[exit -3]", " [exit 12] ", "x", " ", "\r"]
    ),
    max_size=14,
).map("".join)


@given(raw_texts)
@settings(max_examples=500, deadline=None)
def test_raw_files_are_read_by_offsets_as_by_lines(text: str) -> None:
    assert fast_parse_raw(text) == plain_parse_raw(text)


def test_every_capture_reads_as_by_lines() -> None:
    for path in sorted((ROOT / "tests" / "fixtures" / "raw").glob("*/*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        assert fast_parse_raw(text) == plain_parse_raw(text), path


SMI_PIECES = ("Fabric", "  Fabric", "State : A", "Status : B", "Name", "  Name : v", "Product Name : x")
smi_texts = st.lists(
    st.sampled_from([*SMI_PIECES, "\n", "\n\n", " ", "\t", ":", "FB Memory Usage", "Total : 5 MiB"]),
    max_size=16,
).map("".join)


@given(smi_texts)
@settings(max_examples=500, deadline=None)
def test_fields_searched_from_their_line_are_the_fields_searched_from_the_top(text: str) -> None:
    top = re.search(r"^\s*Name\s*:\s*(.*?)\s*$", text, re.MULTILINE)
    assert field(text, "Name") == (top.group(1) if top else None)
    fabric = re.search(r"^\s+Fabric\s*\n\s+State\s*:\s*(.+?)\s*\n\s+Status\s*:\s*(.+?)\s*$", text, re.M)
    assert _fabric(text) == ((fabric.group(1), fabric.group(2)) if fabric else None)
    total = re.search(r"^\s*FB Memory Usage\s*\n\s*Total\s*:\s*(\d+) MiB", text, re.MULTILINE)
    assert _section_total(text, "FB Memory Usage") == (int(total.group(1)) if total else None)
    assert search_from(text, "absent", r"^\s*absent") is None


def plain_fingerprint(facts: Facts) -> str:
    """Facts.fingerprint as it was: the whole dump, hashed."""
    data: dict[str, Any] = facts.model_dump(mode="json", exclude={"collected_at", "format_version"})
    for gpu in data.get("gpus") or []:
        for key in ("temperature_gpu_c", "temperature_memory_c", "power_draw_w", "pcie_gen_current"):
            gpu.pop(key, None)
        gpu.pop("pcie_width_current", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_hosts_sharing_parsed_outputs_share_them_and_keep_their_own_fingerprints(tmp_path: Path) -> None:
    shutil.copytree(H200_RAW, tmp_path / "a")
    shutil.copytree(H200_RAW, tmp_path / "b")
    query = tmp_path / "b" / "nvidia-smi-q.txt"
    query.write_text(query.read_text().replace("GPU UUID", "GPU  UUID", 1))  # one host's own output
    a, b = facts_from_raw(tmp_path / "a", "a"), facts_from_raw(tmp_path / "b", "b")
    assert a.packages is b.packages or a.packages == b.packages
    assert (
        read_raw(tmp_path / "a")["dpkg-nvidia"] is read_raw(tmp_path / "b")["dpkg-nvidia"]
    )  # same bytes, one read
    for facts in (a, b, a, b):
        assert facts.fingerprint() == plain_fingerprint(facts)
    assert a.fingerprint() != b.fingerprint()
