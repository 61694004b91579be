"""Checklist: shipped defaults, spec merge rules, sizing numbers, observed states, Markdown and HTML, CLI."""

from __future__ import annotations

import json
from datetime import date
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal

import pytest
from typer.testing import CliRunner

from provision.checklist import (
    Checklist,
    ChecklistError,
    Observation,
    checklist_for,
    html_to_pdf,
    load_default_items,
    psu_watts,
    render,
    render_html,
    render_markdown,
)
from provision.checklist.pdf import print_argv
from provision.cli import cli
from provision.detect.runner import facts_from_raw
from provision.errors import ProvisionError, SpecError
from provision.spec.models import Spec

EXPECTED_IDS = {
    "above-4g-decoding",
    "resizable-bar",
    "csm-off",
    "pcie-link-speed",
    "power-profile",
    "acs-iommu",
    "sr-iov",
    "secure-boot",
    "slot-placement",
    "cooling",
    "psu-sizing",
    "host-memory",
    "fast-storage",
}
VOID_ELEMENTS = {"meta", "input", "br", "hr", "img", "link"}


def make_spec(bios: dict[str, Any] | None = None, **extra: Any) -> Spec:
    raw: dict[str, Any] = {
        "name": "ws-a40",
        "os": {"distro": "ubuntu", "version": "24.04"},
        "gpus": {"model": "a40", "count": 2},
        "driver": {"branch": 580},
        "bios": bios or {},
        **extra,
    }
    return Spec.model_validate(raw)


def build(spec: Spec, tdp: int | None = 300, memory: float | None = 48) -> Checklist:
    return checklist_for(spec, tdp, memory, host="gpu-ws-01", today=date(2026, 9, 1))


def item_ids(checklist: Checklist) -> list[str]:
    return [item.id for item in checklist.items]


class WellFormed(HTMLParser):
    """Records start/end tag mismatches; void elements need no end tag."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.script_tags = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.script_tags += tag == "script"
        if tag not in VOID_ELEMENTS:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def parse_html(text: str) -> WellFormed:
    parser = WellFormed()
    parser.feed(text)
    parser.close()
    return parser


def test_defaults_load_with_every_field() -> None:
    items = load_default_items()
    assert {item.id for item in items} == EXPECTED_IDS
    for item in items:
        assert all(len(text.strip()) > 20 for text in (item.why, item.how, item.check, item.source)), item.id


@pytest.mark.parametrize("item_id", ["acs-iommu", "secure-boot", "slot-placement", "pcie-link-speed"])
def test_field_failure_items_cite_their_ff(item_id: str) -> None:
    ff = {"acs-iommu": "FF-14", "secure-boot": "FF-11", "slot-placement": "FF-15", "pcie-link-speed": "FF-16"}
    item = next(item for item in load_default_items() if item.id == item_id)
    assert ff[item_id] in item.source


def test_cooling_cites_nvidia_smi_for_95_c() -> None:
    item = next(item for item in load_default_items() if item.id == "cooling")
    assert "95 °C" in item.why and "Memory Max Operating Temp" in item.source


def test_defaults_only_keeps_default_order() -> None:
    assert item_ids(build(make_spec())) == [item.id for item in load_default_items()]


def test_spec_item_replaces_default_in_place_and_keeps_its_check() -> None:
    override = {
        "id": "sr-iov",
        "title": "Enable SR-IOV for vGPU",
        "why": "VMs use vGPU.",
        "how": "Enable it.",
    }
    checklist = build(make_spec({"items": [override]}))
    default = next(item for item in load_default_items() if item.id == "sr-iov")
    replaced = checklist.items[item_ids(checklist).index("sr-iov")]
    assert item_ids(checklist) == [item.id for item in load_default_items()]
    assert (replaced.title, replaced.check, replaced.source) == (
        override["title"],
        default.check,
        "spec ws-a40",
    )


def test_spec_item_with_new_id_is_appended() -> None:
    extra = {"id": "nvlink-bridge", "title": "Fit the NVLink bridge", "why": "P2P.", "how": "Seat it."}
    checklist = build(make_spec({"items": [extra]}))
    assert checklist.items[-1].id == "nvlink-bridge"
    assert checklist.items[-1].check.startswith("No Linux-side check")


def test_skip_removes_item() -> None:
    checklist = build(make_spec({"skip": ["sr-iov", "fast-storage"]}))
    assert not {"sr-iov", "fast-storage"} & set(item_ids(checklist))
    assert len(checklist.items) == len(EXPECTED_IDS) - 2


def test_unknown_skip_id_names_it_and_the_valid_ids() -> None:
    with pytest.raises(SpecError) as err:
        build(make_spec({"skip": ["no-such-item"]}))
    assert isinstance(err.value, ProvisionError)
    assert "'no-such-item'" in str(err.value) and "valid ids: above-4g-decoding" in str(err.value)


def test_duplicate_spec_item_ids_are_an_error() -> None:
    item = {"id": "x-one", "title": "T", "why": "W", "how": "H"}
    with pytest.raises(SpecError, match=r"bios\.items\.1\.id: duplicate checklist item id 'x-one'"):
        build(make_spec({"items": [item, item]}))


def test_psu_rule_for_two_300_w_gpus() -> None:
    assert psu_watts(2, 300) == 1250  # (2 x 300 + 400) x 1.25
    detail = next(item.detail for item in build(make_spec()).items if item.id == "psu-sizing")
    assert detail is not None and "1250 W minimum PSU rating" in detail


def test_unknown_tdp_and_memory_say_so() -> None:
    details = {item.id: item.detail for item in build(make_spec(), tdp=None, memory=None).items}
    assert "TDP unknown in catalog" in str(details["psu-sizing"])
    assert "memory unknown in catalog" in str(details["host-memory"])


def test_host_memory_detail_for_two_48_gib_gpus() -> None:
    details = {item.id: item.detail for item in build(make_spec()).items}
    assert "at least 96 GiB host RAM, 192 GiB recommended" in str(details["host-memory"])


def test_verify_thresholds_appear_on_cooling() -> None:
    spec = make_spec(verify={"max_memory_temp_c": 90})
    details = {item.id: item.detail for item in build(spec).items}
    assert details["cooling"] == "Spec verify thresholds: memory ≤ 90 °C."


def test_markdown_contains_every_title_and_header() -> None:
    checklist = build(make_spec())
    text = render_markdown(checklist)
    assert all(item.title in text for item in checklist.items)
    assert "a40 \N{MULTIPLICATION SIGN} 2" in text and "2026-09-01" in text and "gpu-ws-01" in text


def test_html_is_well_formed_and_printable() -> None:
    text = render_html(build(make_spec()))
    parser = parse_html(text)
    assert parser.errors == [] and parser.stack == []
    assert "@page { size: A4;" in text and "page-break-inside: avoid" in text
    assert text.count('type="checkbox"') == len(EXPECTED_IDS) == text.count("Initials:")
    assert "http" not in text.split("</style>")[0]  # no external assets in the head


def test_html_letter_paper() -> None:
    assert "@page { size: letter;" in render_html(build(make_spec()), paper="letter")


def test_html_escapes_spec_provided_title() -> None:
    hostile = {"id": "evil", "title": "<script>alert(1)</script>", "why": "a < b", "how": "`<b>`"}
    text = render_html(build(make_spec({"items": [hostile]})))
    parser = parse_html(text)
    assert parser.script_tags == 0 and parser.errors == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<code>&lt;b&gt;</code>" in text


def test_html_header_without_host_leaves_a_blank() -> None:
    checklist = checklist_for(make_spec(), 300, 48)
    text = render_html(checklist)
    assert '<span class="blank"></span>' in text and "a40 &times; 2" in text


@pytest.mark.parametrize(
    ("fmt", "marker"), [("md", "# BIOS and hardware checklist"), ("html", "<!DOCTYPE html>")]
)
def test_render_entry_point(fmt: Literal["md", "html"], marker: str) -> None:
    text = render(make_spec(), fmt, gpu_tdp_w=300, gpu_memory_gib=48)
    assert text.startswith(marker) and "1250 W" in text


# --- Observed state from facts ------------------------------------------------------------------

HARDWARE = Path(__file__).parents[1] / "fixtures" / "hardware"


def observed(name: str, spec: Spec | None = None) -> dict[str, Observation]:
    facts = facts_from_raw(HARDWARE / name)
    checklist = checklist_for(spec or make_spec(), 350, 48, today=date(2026, 9, 1), facts=facts)
    return {item.id: item.observation for item in checklist.items if item.observation}


def test_synthesized_ff14_host_states() -> None:
    states = {item_id: obs.status for item_id, obs in observed("synth-2gpu-ff14").items()}
    assert states == {
        "above-4g-decoding": "confirmed",
        "resizable-bar": "confirmed",
        "csm-off": "confirmed",
        "pcie-link-speed": "not-confirmed",
        "power-profile": "not-confirmed",
        "acs-iommu": "not-confirmed",
        "sr-iov": "observed",
        "secure-boot": "observed",
        "slot-placement": "not-confirmed",
        "cooling": "observed",
        "psu-sizing": "not-observable",
        "host-memory": "confirmed",
        "fast-storage": "not-observable",
    }


def test_synthesized_ff14_measured_values() -> None:
    obs = observed("synth-2gpu-ff14")
    assert obs["acs-iommu"].value.startswith(
        "ACS redirect on bridge 0000:00:03.1 (ReqRedir+ CmpltRedir+); ACS redirect on bridge 0000:20:01.1"
    )
    assert "no iommu=pt" in obs["acs-iommu"].value
    assert "GPU 1 Gen4 x8 (max Gen4 x16)" in obs["pcie-link-speed"].value
    assert obs["slot-placement"].value == (
        "0000:01:00.0 on NUMA node 0, 0000:21:00.0 on NUMA node 1; path GPU0-GPU1 SYS"
    )
    assert obs["secure-boot"].value.startswith("enabled (mokutil)")


def test_h200_capture_states_and_reasons() -> None:
    obs = observed("h200-ubuntu2404")
    assert (
        obs["above-4g-decoding"].status == "confirmed" and "BAR1 256.0 GiB" in obs["above-4g-decoding"].value
    )
    assert obs["resizable-bar"].value == "0000:00:06.0 BAR1 256.0 GiB >= memory 140.4 GiB"
    assert (obs["csm-off"].status, obs["host-memory"].status) == ("not-confirmed", "not-confirmed")
    assert obs["host-memory"].value.startswith("host 125.9 GiB for 140.4 GiB GPU memory")
    assert (
        obs["acs-iommu"].status == "not-observable"
        and "sysfs path not in this capture" in obs["acs-iommu"].value
    )
    assert obs["secure-boot"].value == "off: legacy (CSM) boot has no Secure Boot"


def test_without_facts_no_item_has_a_state() -> None:
    assert all(item.observation is None for item in build(make_spec()).items)


def test_spec_added_item_is_not_observable() -> None:
    extra = {"id": "nvlink-bridge", "title": "Fit the NVLink bridge", "why": "P2P.", "how": "Seat it."}
    obs = observed("synth-2gpu-ff14", make_spec({"items": [extra]}))
    assert obs["nvlink-bridge"] == Observation(
        status="not-observable", value="no Linux-side check is defined for this item"
    )


def test_states_render_in_markdown_and_html() -> None:
    facts = facts_from_raw(HARDWARE / "synth-2gpu-ff14", host="gpu-ws-02")
    md = render(make_spec(), "md", facts=facts, facts_from="facts.json")
    html = render(make_spec(), "html", facts=facts)
    assert "**On this host: NOT confirmed.** ACS redirect" in md and "Observed state from:** facts.json" in md
    assert '<p class="observed not-confirmed">' in html and "gpu-ws-02" in html
    assert parse_html(html).errors == []


# --- CLI ---------------------------------------------------------------------------------------------

SPEC_FILE = str(Path(__file__).parents[2] / "specs" / "h200-ubuntu2404.yaml")


def test_cli_from_raw_html(tmp_path: Path) -> None:
    target = tmp_path / "h200.html"
    args = [
        "checklist",
        SPEC_FILE,
        "--from-raw",
        str(HARDWARE / "h200-ubuntu2404"),
        "-f",
        "html",
        "-o",
        str(target),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "NOT confirmed" in target.read_text(encoding="utf-8")


RAW_CAPTURE = Path(__file__).parents[2] / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-01"


def test_cli_from_raw_names_the_host_as_plan_does(tmp_path: Path) -> None:
    """`checklist SPEC --from-raw DIR` and `plan SPEC --from-raw DIR` name the host alike (the
    directory's name, runner.raw_host); --host still names it explicitly."""
    raw = tmp_path / "gpu-node-7"
    raw.mkdir()
    for f in RAW_CAPTURE.glob("*.txt"):
        (raw / f.name).write_bytes(f.read_bytes())
    plan = CliRunner().invoke(cli, ["plan", SPEC_FILE, "--from-raw", str(raw), "--json"])
    hosts = [h["host"] for h in json.loads(plan.stdout)["hosts"]]
    listing = CliRunner().invoke(cli, ["checklist", SPEC_FILE, "--from-raw", str(raw), "-f", "md"])
    named = CliRunner().invoke(cli, ["checklist", SPEC_FILE, "--from-raw", str(raw), "--host", "ws9"])
    assert hosts == ["gpu-node-7"], plan.output
    assert listing.exit_code == 0 and "- **Host:** gpu-node-7\n" in listing.stdout, listing.output
    assert named.exit_code == 0 and "- **Host:** ws9\n" in named.stdout, named.output


def test_cli_facts_with_two_hosts_writes_one_document_each(tmp_path: Path) -> None:
    docs = [
        facts_from_raw(HARDWARE / name, host=host).model_dump(mode="json")
        for name, host in (("h200-ubuntu2404", "h200"), ("synth-2gpu-ff14", "ws02"))
    ]
    (tmp_path / "facts.json").write_text(json.dumps(docs), encoding="utf-8")
    args = [
        "checklist",
        SPEC_FILE,
        "--facts",
        str(tmp_path / "facts.json"),
        "-f",
        "md",
        "-o",
        str(tmp_path / "out"),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["h200.md", "ws02.md"]


def test_cli_unknown_host_in_facts_and_pdf_without_output(tmp_path: Path) -> None:
    facts = facts_from_raw(HARDWARE / "synth-2gpu-ff14", host="ws02")
    (tmp_path / "f.json").write_text(facts.model_dump_json(), encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["checklist", SPEC_FILE, "--facts", str(tmp_path / "f.json"), "--host", "x"]
    )
    assert result.exit_code == 1 and "host 'x' is not in the facts file; it has: ws02" in result.output
    typo = CliRunner().invoke(
        cli, ["checklist", SPEC_FILE, "--facts", str(tmp_path / "f.json"), "--host", "ws2"]
    )
    assert typo.exit_code == 1 and "it has: ws02; did you mean 'ws02'?" in typo.output
    result = CliRunner().invoke(cli, ["checklist", SPEC_FILE, "-f", "pdf"])
    assert result.exit_code == 1 and "--format pdf needs -o/--output FILE" in result.output


def test_cli_other_host_name_is_refused_not_a_blank_checklist(tmp_path: Path) -> None:
    out = tmp_path / "c.html"
    args = ["checklist", SPEC_FILE, "--host", "not-this-machine.example", "-f", "html", "-o", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert line.startswith("error: --host not-this-machine.example: not this machine (localhost, ")
    assert "--facts FILE" in line and "-i INVENTORY -l not-this-machine.example" in line
    assert "\n" not in line and not out.exists()
    typo = CliRunner().invoke(cli, ["checklist", SPEC_FILE, "--host", "locahost"])
    assert typo.exit_code == 1 and typo.output.strip().endswith("did you mean 'localhost'?")


def test_cli_host_with_an_inventory_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["checklist", "-i", str(tmp_path / "h.ini"), "--host", "gpu07"])
    assert result.exit_code == 1
    assert "with -i or --fleet choose hosts with -l gpu07" in result.output


def test_cli_refuses_a_spec_validate_refuses_and_writes_nothing(tmp_path: Path) -> None:
    # An unknown GPU id left the checklist's PSU and RAM items at "unknown in catalog" with exit 0.
    text = Path(SPEC_FILE).read_text(encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    assert "model: h200-sxm" in text
    bad.write_text(text.replace("model: h200-sxm", "model: h300-sxm"), encoding="utf-8")
    out = tmp_path / "checklist.md"
    result = CliRunner().invoke(cli, ["checklist", str(bad), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert "refused [gpu-model-unknown]" in result.output and "h300-sxm" in result.output
    assert not out.exists()


def test_cli_output_an_existing_directory_gets_a_file_inside(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["checklist", SPEC_FILE, "-f", "html", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "checklist.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_argv_is_headless_with_a_fresh_profile(tmp_path: Path) -> None:
    argv = print_argv("chromium", tmp_path / "c.html", tmp_path / "c.pdf", tmp_path / "profile")
    assert argv[0] == "chromium" and "--headless" in argv and "--no-pdf-header-footer" in argv
    assert f"--user-data-dir={tmp_path / 'profile'}" in argv and argv[-1].startswith("file://")


def test_missing_browser_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ChecklistError, match="install it \\(the distribution's chromium package\\)"):
        html_to_pdf("<html></html>")
