"""Checklist v1: shipped defaults, spec merge rules, sizing numbers, Markdown and HTML rendering."""

from __future__ import annotations

from datetime import date
from html.parser import HTMLParser
from typing import Any, Literal

import pytest

from provision.checklist import (
    Checklist,
    checklist_for,
    load_default_items,
    psu_watts,
    render,
    render_html,
    render_markdown,
)
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


def test_cooling_cites_the_seed_for_95_c() -> None:
    item = next(item for item in load_default_items() if item.id == "cooling")
    assert "95 °C" in item.why and "seed" in item.source


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
    with pytest.raises(SpecError, match="duplicate checklist item ids: x-one"):
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
