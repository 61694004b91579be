"""The strict Ant-derived JUnit schema's rules, as code: what JUnit.xsd of windyroad/JUnit-Schema
(https://github.com/windyroad/JUnit-Schema/blob/master/JUnit.xsd, Apache-2.0) requires.

Checked: the root's children and attributes; each suite's element order (``properties``,
``testcase``*, ``system-out``, ``system-err``), its required and allowed attributes and their
types (``xs:int``, ``xs:decimal``, the zone-less ISO 8601 timestamp, non-empty tokens), and
``package``/``id`` on suites inside ``<testsuites>``; each testcase's attributes and at most one of
``skipped``/``error``/``failure`` (``type`` required on the latter two) and no other child.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from decimal import Decimal, InvalidOperation

SUITE_REQUIRED = {"name", "timestamp", "hostname", "tests", "failures", "errors", "time"}
SUITE_ALLOWED = SUITE_REQUIRED | {"skipped"}
CASE_REQUIRED = {"name", "classname", "time"}
TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$")


def problems(xml: str) -> list[str]:
    """Every violation of the strict schema in ``xml``; empty when it is valid."""
    root = ET.fromstring(xml)
    found: list[str] = []
    if root.tag == "testsuite":
        _suite(root, found, aggregated=False)
    elif root.tag == "testsuites":
        _no_extra(root, set(), "testsuites", found)
        for index, suite in enumerate(root):
            if suite.tag != "testsuite":
                found.append(f"testsuites: unexpected <{suite.tag}>")
                continue
            _suite(suite, found, aggregated=True)
            if suite.get("id") != str(index):
                found.append(f"testsuite {index}: id {suite.get('id')!r}, expected {index}")
    else:
        found.append(f"root <{root.tag}> is neither testsuites nor testsuite")
    return found


def _suite(suite: ET.Element, found: list[str], *, aggregated: bool) -> None:
    where = f"testsuite {suite.get('name')!r}"
    required = SUITE_REQUIRED | ({"package", "id"} if aggregated else set())
    _attributes(suite, required, SUITE_ALLOWED | required, where, found)
    for key in ("tests", "failures", "errors", "skipped", "id"):
        if key in suite.attrib and not re.fullmatch(r"-?[0-9]+", suite.attrib[key]):
            found.append(f"{where}: {key}={suite.attrib[key]!r} is not an xs:int")
    _decimal(suite, where, found)
    if not TIMESTAMP.match(suite.get("timestamp", "")):
        found.append(f"{where}: timestamp {suite.get('timestamp')!r} is not YYYY-MM-DDTHH:MM:SS")
    tags = [child.tag for child in suite]
    body = tags[1:-2]
    if tags[:1] != ["properties"] or tags[-2:] != ["system-out", "system-err"] or set(body) - {"testcase"}:
        found.append(
            f"{where}: children {tags[:3]}...{tags[-2:]}, not properties, testcase*, system-out, system-err"
        )
    for prop in suite.iterfind("properties/property"):
        _attributes(prop, {"name", "value"}, {"name", "value"}, f"{where} property", found)
    for case in suite.iterfind("testcase"):
        _case(case, found)


def _case(case: ET.Element, found: list[str]) -> None:
    where = f"testcase {case.get('name')!r}"
    _attributes(case, CASE_REQUIRED, CASE_REQUIRED, where, found)
    _decimal(case, where, found)
    children = [c.tag for c in case]
    if len(children) > 1 or set(children) - {"skipped", "error", "failure"}:
        found.append(f"{where}: children {children}; at most one of skipped, error, failure")
    for outcome in case:
        if outcome.tag in ("error", "failure") and "type" not in outcome.attrib:
            found.append(f"{where}: <{outcome.tag}> without type")
        if outcome.tag in ("error", "failure") and set(outcome.attrib) - {"type", "message"}:
            found.append(f"{where}: <{outcome.tag}> has attributes beyond message and type")


def _attributes(el: ET.Element, required: set[str], allowed: set[str], where: str, found: list[str]) -> None:
    if missing := required - set(el.attrib):
        found.append(f"{where}: missing {sorted(missing)}")
    if extra := set(el.attrib) - allowed:
        found.append(f"{where}: attributes the schema does not declare: {sorted(extra)}")
    for key in required & {"name", "hostname"}:
        if key in el.attrib and not el.attrib[key].strip():
            found.append(f"{where}: empty {key}")


def _no_extra(el: ET.Element, allowed: set[str], where: str, found: list[str]) -> None:
    if extra := set(el.attrib) - allowed:
        found.append(f"{where}: attributes the schema does not declare: {sorted(extra)}")


def _decimal(el: ET.Element, where: str, found: list[str]) -> None:
    try:
        Decimal(el.get("time", "x"))
    except InvalidOperation:
        found.append(f"{where}: time {el.get('time')!r} is not an xs:decimal")
