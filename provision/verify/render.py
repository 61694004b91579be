"""Report output: a rich table, JSON, and JUnit XML (one testcase per check, failures as <failure>)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from provision import __version__
from provision.verify.models import CheckResult, Report

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def render_table(report: Report, console: Console) -> None:
    """The results as a table, then the hints of what did not pass, then the totals."""
    title = f"provision verify {escape(report.spec)} on {escape(report.host)}"
    table = Table(title=title, title_justify="left", show_lines=False)
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
    """A ``<testsuites>`` document holding ``suites``, with the XML declaration.

    The strict Ant-derived JUnit schema (windyroad/JUnit-Schema, JUnit.xsd) wants ``package``
    and a running ``id`` on every suite inside ``<testsuites>``, and no attribute on the root.
    """
    root = ET.Element("testsuites")
    for index, suite in enumerate(suites):
        suite.set("package", JUNIT_PACKAGE)
        suite.set("id", str(index))
        root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


JUNIT_PACKAGE = "provision.verify"


def junit_suite(report: Report, name: str = "provision verify") -> ET.Element:
    """One ``<testsuite>`` of ``report``, in the strict schema's element order.

    ``properties`` (spec, host, provision version, warnings), a testcase per result, then
    ``system-out`` with every check's measured value, threshold and source (the schema allows
    no output inside a testcase) and an empty ``system-err``. The timestamp is the run's start
    in UTC without a zone, as the schema's pattern requires.
    """
    counts = report.counts()
    started = report.started_at or datetime.now(UTC)
    suite = ET.Element(
        "testsuite",
        name=name,
        timestamp=started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        hostname=report.host or "localhost",
        tests=str(len(report.results)),
        failures=str(counts["fail"]),
        errors="0",
        skipped=str(counts["skip"]),
        time=f"{report.seconds:.3f}",
    )
    properties = ET.SubElement(suite, "properties")
    for key, value in _properties(report).items():
        ET.SubElement(properties, "property", name=key, value=value)
    for r in report.results:
        suite.append(_testcase(r))
    ET.SubElement(suite, "system-out").text = "\n".join(_summary_line(r) for r in report.results) + "\n"
    ET.SubElement(suite, "system-err").text = ""
    return suite


def _properties(report: Report) -> dict[str, str]:
    counts = report.counts()
    return {
        "provision.version": __version__,
        "spec": report.spec,
        "host": report.host,
        "warnings": str(counts["warn"]),
    }


def _testcase(r: CheckResult) -> ET.Element:
    # Checks are evaluated over inputs gathered first (the GPU runs included), which the suite's
    # time covers; evaluating one check takes no measurable time, so each testcase says 0.
    case = ET.Element("testcase", name=r.name, classname=f"{JUNIT_PACKAGE}.{r.id}", time="0")
    if r.status == "fail":
        _, measured, threshold, _ = _cells(r)
        failure = ET.SubElement(
            case, "failure", message=r.detail or f"{measured} not {threshold}", type="fail"
        )
        failure.text = _details(r) + (f"\nhint: {r.hint}" if r.hint else "")
    elif r.status == "skip":
        ET.SubElement(case, "skipped", message=r.detail or "skipped")
    return case


def _details(r: CheckResult) -> str:
    _, measured, threshold, notes = _cells(r)
    return f"measured: {measured or '-'}\nthreshold: {threshold or '-'}\nsource/detail: {notes or '-'}"


def _summary_line(r: CheckResult) -> str:
    return f"{r.status} {r.name}: " + _details(r).replace("\n", "; ")
