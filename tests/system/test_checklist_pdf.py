"""The printable checklist in a real browser: HTML -> PDF with headless Chromium, read back with poppler.

Checks per paper size: the page size and count (``pdfinfo``), every item's title present and
each item wholly on one page (``pdftotext`` per page: item headers and sign-off lines alternate),
and no word outside the printable area (``pdftotext -bbox``). Without Chromium or poppler these
tests are skipped with the reason; CI installs Debian's ``chromium`` and ``poppler-utils`` and sets
``PROVISION_REQUIRE_BROWSER=1`` (``.ci/run``), under which a missing tool fails them instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from provision.checklist import Checklist, checklist_for, html_to_pdf, render_html
from provision.detect.runner import facts_from_raw
from provision.spec.loader import load_spec

ROOT = Path(__file__).parents[2]
SYNTH = ROOT / "tests" / "fixtures" / "hardware" / "synth-2gpu-ff14"
PAGE_POINTS = {"a4": (595, 842), "letter": (612, 792)}
"""Page sizes in PostScript points (A4 210 x 297 mm; Letter 8.5 x 11 in)."""
MARGIN_PT = 30
"""Words must stay this far inside the page edge (the CSS margin is 14-15 mm, about 40 pt)."""

BOX_KEYS = ("width", "height", "xmin", "ymin", "xmax", "ymax")
TOOLS = ("chromium", "pdfinfo", "pdftotext")


def _require_tools() -> None:
    """Skip, with the reason, where a tool is missing; fail instead where CI requires the browser."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if not missing:
        return
    reason = f"install Debian's chromium and poppler-utils (missing: {', '.join(missing)})"
    if os.environ.get("PROVISION_REQUIRE_BROWSER") == "1":
        pytest.fail(f"PROVISION_REQUIRE_BROWSER=1: {reason}")
    pytest.skip(reason)


def _checklist() -> Checklist:
    spec = load_spec(ROOT / "specs" / "h200-ubuntu2404.yaml")
    facts = facts_from_raw(SYNTH, host="gpu-ws-02")
    return checklist_for(spec, 700, 141, facts=facts, facts_from="synthesized FF-14/15/16 host")


@pytest.fixture(scope="module", params=["a4", "letter"])
def printed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    _require_tools()
    paper = request.param
    pdf = tmp_path_factory.mktemp(paper) / "checklist.pdf"
    pdf.write_bytes(html_to_pdf(render_html(_checklist(), paper)))
    return paper, pdf


def _run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def _pages(pdf: Path) -> int:
    return int(re.search(r"^Pages:\s+(\d+)", _run("pdfinfo", str(pdf)), re.MULTILINE).group(1))  # type: ignore[union-attr]


def _page_text(pdf: Path, page: int) -> str:
    text = _run("pdftotext", "-f", str(page), "-l", str(page), "-layout", str(pdf), "-")
    return re.sub(r"\s+", " ", re.sub(r"-\s+", "-", text))


def test_page_size_and_count(printed: tuple[str, Path]) -> None:
    paper, pdf = printed
    info = _run("pdfinfo", str(pdf))
    width, height = PAGE_POINTS[paper]
    size = re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", info)
    assert size is not None, info
    assert abs(float(size.group(1)) - width) < 1 and abs(float(size.group(2)) - height) < 1, info
    assert 3 <= _pages(pdf) <= 10


def test_every_item_is_whole_on_one_page(printed: tuple[str, Path]) -> None:
    _, pdf = printed
    titles = [f"{n}. {item.title}" for n, item in enumerate(_checklist().items, start=1)]
    found: dict[str, int] = {}
    for page in range(1, _pages(pdf) + 1):
        text = _page_text(pdf, page)
        events = sorted(
            [(text.find(t), "item") for t in titles if t in text]
            + [(m.start(), "signoff") for m in re.finditer("Initials:", text)]
        )
        kinds = [kind for _, kind in events]
        assert kinds == ["item", "signoff"] * (len(kinds) // 2), f"page {page} splits an item: {kinds}"
        found.update({t: page for t in titles if t in text})
    assert sorted(found) == sorted(titles)


def test_observed_states_are_printed(printed: tuple[str, Path]) -> None:
    _, pdf = printed
    text = " ".join(_page_text(pdf, p) for p in range(1, _pages(pdf) + 1))
    assert "ACS redirect on bridge 0000:00:03.1" in text and "NOT CONFIRMED" in text
    assert "gpu-ws-02" in text and "Supermicro" in text


def test_no_text_outside_the_printable_area(printed: tuple[str, Path]) -> None:
    _, pdf = printed
    parser = _BBoxes()
    parser.feed(_run("pdftotext", "-bbox", str(pdf), "-"))
    assert parser.words > 500
    assert parser.outside == [], parser.outside[:5]


class _BBoxes(HTMLParser):
    """Collects words of ``pdftotext -bbox`` output lying within MARGIN_PT of a page edge."""

    def __init__(self) -> None:
        super().__init__()
        self.page = (0.0, 0.0)
        self.words = 0
        self.outside: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {
            k: float(v)
            for k, v in attrs
            if v is not None and k in ("width", "height", "xmin", "ymin", "xmax", "ymax")
        }
        if tag == "page":
            self.page = (values["width"], values["height"])
        elif tag == "word":
            self.words += 1
            width, height = self.page
            box = (values["xmin"], values["ymin"], width - values["xmax"], height - values["ymax"])
            if min(box) < MARGIN_PT:
                self.outside.append(f"{box} on a {width}x{height} page")


def test_without_chromium_the_pdf_tests_skip_with_the_reason_unless_ci_requires_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("PROVISION_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"install Debian's chromium and poppler-utils \(missing"):
        _require_tools()
    monkeypatch.setenv("PROVISION_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="PROVISION_REQUIRE_BROWSER=1: install Debian's chromium"):
        _require_tools()
