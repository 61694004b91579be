"""Live detection runs only the probes of the host's OS family, chosen from its ``/etc/os-release``.

The collector (every detection path runs it: this machine, ssh hosts, the Ansible play, verify's
agent) reads ``ID``/``ID_LIKE`` and leaves out the other family's probes; a host of no known family
runs none of them and its package facts say why. The runner is replaced by a recorder: no command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.detect import collector, runner
from provision.detect.domains.packages import BY_FAMILY
from provision.detect.facts import Facts
from provision.detect.registry import all_probes
from provision.unknown import Unknown

RELEASES = {
    "ubuntu": 'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n',
    "debian": 'ID=debian\nVERSION_ID="12"\n',
    "mint": 'ID=linuxmint\nID_LIKE="ubuntu debian"\nVERSION_ID="22"\n',
    "rocky": 'ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n',
    "arch": "ID=arch\nBUILD_ID=rolling\nVERSION_ID=20261201\n",
}
FAMILY_IDS = {family: {f.id for f in facts.values()} for family, facts in BY_FAMILY.items()}
"""Probe ids of each family: Debian's dpkg/apt probes, RedHat's rpm/dnf ones."""


def _detect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: str | None) -> tuple[list[str], Facts]:
    """Detect this machine with ``release`` as its os-release (None: unreadable); the probe ids run."""
    path = tmp_path / "os-release"
    if release is not None:
        path.write_text(release, encoding="utf-8")
    monkeypatch.setattr(collector, "OS_RELEASE", str(path))
    ran: list[list[str]] = []

    def record(argv: list[str], timeout: float) -> dict[str, Any]:
        ran.append(argv)
        if argv == ["cat", "/etc/os-release"] and release is not None:
            return {"command": "cat /etc/os-release", "output": release, "rc": 0}
        return {"command": " ".join(argv), "output": f"{argv[0]}: not found\n", "rc": 127}

    monkeypatch.setattr(collector, "run_probe", record)
    facts = runner.detect_local()
    argvs = {tuple(p.argv): p.id for p in all_probes()}
    return [argvs[tuple(a)] for a in ran], facts


@pytest.mark.parametrize(
    ("release", "family"),
    [("ubuntu", "Debian"), ("debian", "Debian"), ("mint", "Debian"), ("rocky", "RedHat")],
)
def test_only_the_hosts_family_probes_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: str, family: str
) -> None:
    ran, _ = _detect(tmp_path, monkeypatch, RELEASES[release])
    other = set().union(*(ids for f, ids in FAMILY_IDS.items() if f != family))
    assert FAMILY_IDS[family] <= set(ran)
    assert not other & set(ran)
    assert {"os-release", "uname", "query-gpu"} <= set(ran)  # every host's probes still run


def test_a_host_of_no_known_family_runs_no_package_probe_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran, facts = _detect(tmp_path, monkeypatch, RELEASES["arch"])
    assert not set().union(*FAMILY_IDS.values()) & set(ran)
    for value in (facts.packages, facts.package_locks, facts.origins):
        assert isinstance(value, Unknown)
        assert value.unknown.startswith(
            "not probed: /etc/os-release ID arch is of no OS family provision knows"
        )
    assert facts.os_family() == "Debian"  # the planner's fallback is unchanged: os-mismatch refuses it


def test_an_unreadable_os_release_runs_no_family_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran, facts = _detect(tmp_path, monkeypatch, None)
    assert not set().union(*FAMILY_IDS.values()) & set(ran)
    assert isinstance(facts.os, Unknown) and isinstance(facts.packages, Unknown)


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        (RELEASES["rocky"], ["rocky", "rhel", "centos", "fedora"]),
        ("ID=\nID_LIKE=debian\n", []),
        ("# comment\nNAME=x\n", []),
        ("\x00\xff=\n", []),
    ],
)
def test_os_ids_read_id_then_id_like_and_never_raise(tmp_path: Path, text: str, ids: list[str]) -> None:
    path = tmp_path / "os-release"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    assert collector.os_ids(str(path)) == ids
    assert collector.os_ids(str(tmp_path / "missing")) == []


def test_probes_carry_their_familys_ids_to_every_host() -> None:
    """The ids travel in the collector's input, so remote and ssh hosts choose as this machine does."""
    by_id = {p["id"]: p for p in (probe.to_json() for probe in all_probes())}
    assert by_id["dpkg-nvidia"]["os_ids"] == ["debian", "ubuntu"]
    assert set(by_id["rpm-nvidia"]["os_ids"]) == {"rocky", "rhel", "centos", "fedora"}
    assert "os_ids" not in by_id["uname"]
