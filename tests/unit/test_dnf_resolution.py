"""The RedHat install's refusal before anything changes, templated by Ansible's Templar on the results
``ansible.builtin.dnf`` gives in check mode ("Installed: <nevra>", "Removed: <nevra>"; the lines
below are as real dnf 4.14 resolved them in tests/integration/test_dnf_resolve_real.py): a forbidden
package coming in, or a package going that is not replaced, stops the role with the FF-08 finding
apt's simulation gives on Debian; an upgrade's old version is not a removal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core 2.19 templates only strings marked trusted; older releases template any string
    from ansible.template import trust_as_template
except ImportError:  # pragma: no cover - ansible-core < 2.19

    def trust_as_template(value: str) -> str:  # type: ignore[misc]
        return value


from provision.os import name_regex

TASKS = Path(__file__).parents[2] / "playbooks" / "roles" / "nvidia_packages" / "tasks" / "RedHat.yml"
REFUSE = "Refuse a transaction that removes packages or pulls in a driver the spec does not ask for"


def _install_block() -> dict[str, Any]:
    return next(t for t in yaml.safe_load(TASKS.read_text()) if "block" in t and "rescue" in t)


def refusal(results: list[str], forbidden: str = "(?!)", removable: str = "(?!)") -> dict[str, Any]:
    """The refusal task's removed and unwanted packages and its message, for dnf's check-mode
    ``results``; ``forbidden`` and ``removable``: the role's name regexes (:func:`name_regex`)."""
    block = _install_block()
    task = next(t for t in block["block"] if t["name"] == REFUSE)
    variables: dict[str, Any] = {
        "nvidia_packages_resolved": {"results": results},
        "nvidia_packages_forbidden_regex": forbidden,
        "nvidia_packages_removable_regex": removable,
    }
    for name, expression in {**block["vars"], **task["vars"]}.items():
        variables[name] = trust_as_template(expression)
    templar = Templar(loader=DataLoader(), variables=variables)
    removed = templar.template(trust_as_template("{{ nvidia_packages_removed }}"))
    unwanted = templar.template(trust_as_template("{{ nvidia_packages_unwanted }}"))
    message = " ".join(
        str(templar.template(trust_as_template(task["ansible.builtin.assert"]["fail_msg"]))).split()
    )
    return {"removed": removed, "unwanted": unwanted, "message": message}


FRESH_OPEN = [
    "Installed: dkms-3.2.1-1.el9.noarch",
    "Installed: nvidia-driver-3:580.95.05-1.el9.x86_64",
    "Installed: kmod-nvidia-open-dkms-3:580.95.05-1.el9.x86_64",
    "Installed: nvidia-kmod-common-3:580.95.05-1.el9.noarch",
    "Installed: nvidia-open-3:580.95.05-1.el9.x86_64",
]
UPGRADE = [
    "Installed: nvidia-open-3:580.95.05-1.el9.x86_64",
    "Installed: libnccl-2.28.3-1+cuda13.0.x86_64",
    "Removed: nvidia-open-3:580.82.07-1.el9.x86_64",
    "Removed: libnccl-2.27.7-1+cuda13.0.x86_64",
]
FLAVOUR_SWITCH = [
    "Installed: cuda-drivers-3:580.95.05-1.el9.x86_64",
    "Installed: kmod-nvidia-latest-dkms-3:580.95.05-1.el9.x86_64",
    "Removed: kmod-nvidia-open-dkms-3:580.95.05-1.el9.x86_64",
    "Removed: nvidia-open-3:580.95.05-1.el9.x86_64",
]
DRIVER_FAMILY = name_regex(("nvidia-*", "kmod-nvidia-*", "cuda-drivers*", "libnvidia-*"))


@pytest.mark.parametrize(
    ("results", "forbidden", "removable", "removed", "unwanted"),
    [
        (FRESH_OPEN, name_regex(("cuda-drivers", "kmod-nvidia-latest-dkms")), "(?!)", [], []),
        (UPGRADE, "(?!)", "(?!)", [], []),
        (FRESH_OPEN, name_regex(("nvidia-kmod-common",)), "(?!)", [], ["nvidia-kmod-common"]),
        (FLAVOUR_SWITCH, "(?!)", "(?!)", ["kmod-nvidia-open-dkms", "nvidia-open"], []),
        (FLAVOUR_SWITCH, name_regex(("nvidia-open*",)), DRIVER_FAMILY, [], []),
        ([], "(?!)", "(?!)", [], []),
    ],
    ids=[
        "fresh",
        "upgrade-is-no-removal",
        "forbidden-dependency",
        "unplanned-removal",
        "planned-switch",
        "none",
    ],
)
def test_what_the_resolution_would_do_is_read_by_name(
    results: list[str], forbidden: str, removable: str, removed: list[str], unwanted: list[str]
) -> None:
    got = refusal(results, forbidden, removable)
    assert (got["removed"], got["unwanted"]) == (removed, unwanted)


def test_a_forbidden_package_is_the_same_ff08_finding_as_on_debian() -> None:
    results = [*FRESH_OPEN, "Installed: cuda-drivers-3:580.95.05-1.el9.x86_64"]
    got = refusal(results, name_regex(("cuda", "cuda-[0-9]*", "cuda-drivers")))
    assert got["unwanted"] == ["cuda-drivers"]
    assert got["message"] == (
        "dnf would install cuda-drivers; refusing the transaction (field failure FF-08: a meta-package "
        "must not replace the driver)"
    )


def test_the_install_follows_the_resolution_with_the_same_arguments_and_is_undone_only_before_it() -> None:
    block = _install_block()
    resolve, _, install = block["block"]
    assert resolve["check_mode"] is True and resolve["ansible.builtin.dnf"] == install["ansible.builtin.dnf"]
    reset = next(t for t in block["rescue"] if "module" in str(t.get("ansible.builtin.command", "")))
    assert "nvidia_packages_installed is not defined" in reset["when"]


def test_the_enabled_stream_is_read_so_the_planned_one_is_not_switched_to_again() -> None:
    """``dnf module list`` as real dnf printed it with 580-open enabled (the role's \\1 read literally
    before: every apply switched to the stream already enabled)."""
    task = yaml.safe_load(TASKS.read_text())[0]
    fixture = Path(__file__).parents[2] / "tests/fixtures/redhat/dnf-module-list-enabled-installed.txt"
    lines = fixture.read_text().splitlines()
    templar = Templar(loader=DataLoader(), variables={"nvidia_packages_streams": {"stdout_lines": lines}})
    assert templar.template(trust_as_template(task["vars"]["nvidia_packages_enabled"])) == [
        "nvidia-driver:580-open"
    ]
