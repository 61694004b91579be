"""Report output: a rich table, JSON, and JUnit XML (one testcase per check, failures as <failure>)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision.verify.models import CheckResult, Report

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def render_table(report: Report, console: Console) -> None:
    """The results as a table, then the hints of what did not pass, then the totals."""
    table = Table(title=f"provision verify {escape(report.spec)} on {escape(report.host)}", show_lines=False)
    # Check names and statuses never break mid-word; the long columns wrap at spaces first.
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for column in ("measured", "threshold", "source / detail"):
        table.add_column(column, overflow="fold", ratio=1)
    for r in report.results:
        table.add_row(
            *(escape(c) for c in _cells(r)[:1]),
            f"[{STYLE[r.status]}]{r.status}[/]",
            *(escape(c) for c in _cells(r)[1:]),
        )
    console.print(table)
    for r in report.results:
        if r.hint:
            console.print(
                f"[{STYLE[r.status]}]{r.status}[/] {escape(r.name)}: {escape(r.hint)}", soft_wrap=True
            )
    counts = ", ".join(f"{n} {s}" for s, n in report.counts().items())
    console.print(f"{counts} in {report.seconds:.0f} s")


def _cells(r: CheckResult) -> tuple[str, str, str, str]:
    measured = str(r.measured) if r.measured else ""
    threshold = str(r.threshold) if r.threshold else ""
    notes = "; ".join(x for x in (r.threshold.source if r.threshold else "", r.detail) if x)
    return r.name, measured, threshold, notes


def junit_xml(report: Report) -> str:
    """JUnit XML: one testsuite, one testcase per result; fail -> <failure>, skip -> <skipped>."""
    return junit_document([junit_suite(report)])


def junit_document(suites: list[ET.Element]) -> str:
    """A ``<testsuites>`` document holding ``suites``, with the XML declaration."""
    root = ET.Element("testsuites", name="provision verify")
    root.extend(suites)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def junit_suite(report: Report, name: str = "provision verify") -> ET.Element:
    """One ``<testsuite>`` of ``report``: a testcase per result."""
    counts = report.counts()
    suite = ET.Element(
        "testsuite",
        name=name,
        tests=str(len(report.results)),
        failures=str(counts["fail"]),
        errors="0",
        skipped=str(counts["skip"]),
        time=f"{report.seconds:.3f}",
        hostname=report.host,
    )
    for r in report.results:
        suite.append(_testcase(r))
    return suite


def _testcase(r: CheckResult) -> ET.Element:
    case = ET.Element("testcase", classname=f"provision.verify.{r.id}", name=r.name)
    _, measured, threshold, notes = _cells(r)
    text = f"measured: {measured or '-'}\nthreshold: {threshold or '-'}\nsource/detail: {notes or '-'}"
    if r.status == "fail":
        failure = ET.SubElement(
            case, "failure", message=r.detail or f"{measured} not {threshold}", type="fail"
        )
        failure.text = text + (f"\nhint: {r.hint}" if r.hint else "")
    elif r.status == "skip":
        ET.SubElement(case, "skipped", message=r.detail or "skipped")
    else:
        ET.SubElement(case, "system-out").text = f"status: {r.status}\n{text}"
    return case
