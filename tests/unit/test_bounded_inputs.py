"""The crashes found by trying the product as an attacker, each now one line (or a value), and the
class each belongs to: inputs read by the shared reader, bounded numbers, bounded work per line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from provision.cli import cli
from provision.detect.domains.pci import parse_sys_pci
from provision.lock import store
from provision.verify.monitoring_probe import family_names, scrape_from

ROOT = Path(__file__).resolve().parents[2]
SPEC = str(ROOT / "specs" / "h200-ubuntu2404.yaml")
EXPORTER_PAGE = ROOT / "tests" / "fixtures" / "monitoring" / "dcgm-exporter-metrics.txt"
SYS_PCI = ROOT / "tests" / "fixtures" / "facts" / "sys-pci" / "h200.txt"


def _one_line_error(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.output.startswith("error: ")
    assert result.output.count("\n") == 1, result.output
    return result.output


@pytest.mark.parametrize("kind", ["directory", "not-utf8", "nul", "missing", "fifo"])
def test_checklist_facts_of_any_kind_is_one_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "facts.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "not-utf8":
        path.write_bytes(b'{"host": "\xff"}')
    elif kind == "nul":
        path.write_bytes(b'{"host": "a\x00"}')
    elif kind == "fifo":
        os.mkfifo(path)
    said = _one_line_error(["checklist", SPEC, "--facts", str(path)])
    assert str(path) in said


def test_an_inventory_of_binary_data_is_one_line(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts"
    inventory.write_bytes(bytes(range(256)) * 4)
    said = _one_line_error(["plan", "-i", str(inventory)])
    assert "not a text inventory file" in said


@pytest.mark.parametrize("depth", [500, 5000, 200_000])
def test_lock_show_on_a_deeply_nested_lock_is_no_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, depth: int
) -> None:
    tmp_path.chmod(0o755)
    (tmp_path / "lock.json").write_text('{"number": 1, "spec": ' + "[" * depth + "]" * depth + "}")
    monkeypatch.setattr(store, "LOCK_DIRECTORY", tmp_path)
    result = CliRunner().invoke(cli, ["lock", "show"])
    assert ("Traceback" not in result.output and result.exception is None) or isinstance(
        result.exception, SystemExit
    )


@pytest.mark.parametrize(
    "speed", ["1.2.3 GT/s PCIe", "9" * 5000 + " GT/s", ". GT/s", "16.0.0 GT/s", "inf GT/s"]
)
def test_a_malformed_link_speed_is_no_link_reading(speed: str) -> None:
    text = SYS_PCI.read_text()
    mutated = "\n".join(
        f"max_link_speed: {speed}" if line.startswith("max_link_speed:") else line
        for line in text.splitlines()
    )
    parse_sys_pci(mutated.split("\n", 1)[1], 0)  # the capture's body, without its "$ command" line


def test_family_names_are_the_prometheus_parsers_on_a_real_exporter_page() -> None:
    page = EXPORTER_PAGE.read_text()
    assert family_names(page) == {f.name for f in text_string_to_metric_families(page)}


@pytest.mark.parametrize(
    "page",
    [
        "# HELP c_total Counts.\n# TYPE c_total counter\nc_total 1\n",
        '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\nloose 2\n',
        '# TYPE s summary\ns{quantile="0.5"} 1\ns_sum 1\ns_count 1\n# HELP g doc\ng 1\n',
        "untyped_sample 1\nuntyped_sample 2\n",
    ],
)
def test_family_names_name_families_as_the_library_does(page: str) -> None:
    assert family_names(page) == {f.name for f in text_string_to_metric_families(page)}


def test_an_exporter_page_with_a_huge_help_line_reads_only_the_names() -> None:
    # 32 MiB (hostprobe's limit) of HELP text and of label values: the library parser costs ~1 us
    # per character here (40 s); only the first tokens of each line are read.
    help_line = "# HELP x " + "a\\" * (8 << 20) + "\n# TYPE x gauge\nx 1\n"
    labels = "# TYPE y gauge\n" + ('y{a="' + "\\\\" * 2000 + '"} 1\n') * 4000
    assert scrape_from({"url": "u", "status": 200, "text": help_line + labels}).names == ("x", "y")


def test_a_page_with_an_invalid_family_name_says_so_in_one_line() -> None:
    scraped = scrape_from({"url": "u", "status": 200, "text": "# TYPE 9bad gauge\n"})
    assert scraped.error == "not the Prometheus text format: line 1: '9bad' is not a metric name"
    assert json.dumps(scraped.model_dump())  # a plain value
