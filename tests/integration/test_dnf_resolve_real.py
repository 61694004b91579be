"""The RedHat install's resolution before anything changes, with real dnf 4 in an installroot.

``ansible.builtin.dnf`` in check mode, with the arguments of the nvidia_packages role's install
(``tasks/RedHat.yml``) confined to the root, resolves against the stand-ins of NVIDIA's rhel9
repository and EPEL (harness/rhelrepo.py: empty packages, no scriptlet runs); the role's own refusal
expressions then read its results (:func:`tests.unit.test_dnf_resolution.refusal`). Proven here: the
resolution names the dependencies dnf would bring (a forbidden one is refused with the FF-08 finding),
an in-branch upgrade is no removal, a flavour switch's erasures are removals that only the driver's
family may be, and the check changes nothing in the root's rpm database.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from provision.os import name_regex
from tests.integration.harness import runner
from tests.integration.harness.dnfroot import InstallRoot
from tests.integration.test_dnf_real import MISSING, driver, ok
from tests.integration.test_dnf_real import el9 as el9
from tests.integration.test_dnf_real import host_locklist_untouched as host_locklist_untouched
from tests.integration.test_dnf_real import repos as repos
from tests.unit.test_dnf_resolution import DRIVER_FAMILY, TASKS, refusal

pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"real dnf tests need {', '.join(MISSING)}")
DNF = "/usr/bin/python3"
"""The interpreter with python3-dnf (the module imports dnf on the managed host)."""


def _role_install_arguments() -> dict[str, Any]:
    block = next(t for t in yaml.safe_load(TASKS.read_text()) if "rescue" in t)
    return dict(block["block"][0]["ansible.builtin.dnf"])


def resolve(root: InstallRoot, names: list[str], *, allowerasing: bool = False) -> list[str]:
    """``results`` of the role's check-mode dnf task for ``names`` in ``root``."""
    conf = root.path / "etc/dnf/dnf.conf"
    conf.write_text(
        f"[main]\nreposdir={root.path}/etc/yum.repos.d\npluginconfpath={root.path}/etc/dnf/plugins\n"
    )
    arguments = {
        **_role_install_arguments(),
        "name": names,
        "allowerasing": allowerasing,
        "installroot": str(root.path),
        "conf_file": str(conf),
        "releasever": str(root.major),
        "use_backend": "dnf4",  # the host is Debian: no dnf major to detect from its facts
    }
    task = {"name": "Resolve", "ansible.builtin.dnf": arguments, "check_mode": True}
    playbook = root.path.parent / "resolve.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [task]}]))
    inventory = root.path.parent / "inventory"
    inventory.write_text(f"localhost ansible_connection=local ansible_python_interpreter={DNF}\n")
    result = runner.run_playbook(inventory, playbook, root.path.parent)
    res = runner.task_results(result)["Resolve"]
    assert result.status == "successful", res
    assert res["msg"].startswith("Check mode"), res
    return list(res["results"])


def test_the_resolution_names_every_dependency_and_a_forbidden_one_is_refused(el9: InstallRoot) -> None:
    ok(el9.dnf("module", "enable", "nvidia-driver:580-open"))
    before = el9.rpm_qa().output
    results = resolve(el9, ["nvidia-open"])
    assert "Installed: nvidia-kmod-common-3:580.95.05-1.el9.noarch" in results, results
    assert "Installed: kmod-nvidia-open-dkms-3:580.95.05-1.el9.x86_64" in results, results
    open_forbidden = name_regex(("cuda", "cuda-[0-9]*", "cuda-drivers", "kmod-nvidia-latest-dkms"))
    allowed = refusal(results, open_forbidden)
    assert (allowed["removed"], allowed["unwanted"]) == ([], [])
    refused = refusal(results, name_regex(("nvidia-kmod-common",)))
    assert refused["unwanted"] == ["nvidia-kmod-common"]
    assert refused["message"] == "dnf would install nvidia-kmod-common; " + _ff08()
    assert el9.rpm_qa().output == before  # the check installed nothing


def test_an_upgrade_is_no_removal_and_a_flavour_switch_erases_only_the_drivers_family(
    el9: InstallRoot,
) -> None:
    ok(el9.dnf("module", "enable", "nvidia-driver:580-open"))
    ok(el9.dnf("install", "nvidia-open-3:580.82.07"))
    upgrade = resolve(el9, ["nvidia-open-3:580.95.05"])
    assert "Removed: nvidia-open-3:580.82.07-1.el9.x86_64" in upgrade, upgrade  # dnf lists the old one
    assert refusal(upgrade)["removed"] == []
    ok(el9.dnf("module", "switch-to", "nvidia-driver:580-dkms", "--allowerasing"))
    installed = driver(el9)
    switch = resolve(el9, ["cuda-drivers"], allowerasing=True)
    removed = refusal(switch)["removed"]
    assert "kmod-nvidia-open-dkms" in removed or "nvidia-open" in removed, switch
    assert refusal(switch, removable=DRIVER_FAMILY)["removed"] == []
    assert driver(el9) == installed


def _ff08() -> str:
    return "refusing the transaction (field failure FF-08: a meta-package must not replace the driver)"
