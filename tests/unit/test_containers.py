"""The containers component: the toolkit at one release, the runtime configured, the CDI spec kept
current with the driver, the /dev/char rule; its refusals; verify's container checks.

Facts come from the fact cases under tests/fixtures/facts/ (parsed by the real parsers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provision.apply.rolevars import plan_problems
from provision.components.base import Action, Component, Step
from provision.detect.domains.containers import (
    CdiSpecsFact,
    ContainerConfigFact,
    ContainerdVersionFact,
    ContainerFacts,
    DockerVersionFact,
    PodmanVersionFact,
    RefreshUnitsFact,
)
from provision.detect.domains.driver import LoadedDriver
from provision.detect.domains.gpu import PciDevice
from provision.detect.fact import FactType
from provision.detect.facts import Facts, Unknown
from provision.os.models import PackageLocks
from provision.plan.models import Plan
from provision.plan.planner import make_plan
from provision.verify.checks_containers import OBSERVER, commands, containers_from
from provision.verify.limits import shipped_limits
from provision.verify.observe import host_job
from provision.verify.runs import VerifyInputs
from provision.verify.workflow import evaluate
from provision.versions import DottedVersion, DriverVersion
from tests.unit.factories import CATALOG, ROOT, fresh_ubuntu, invoke, pkg, probe, spec

CASES = ROOT / "tests" / "fixtures" / "facts"
TOOLKIT = (
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)
GPU = PciDevice(bdf="0000:41:00.0", class_code="0302", device_id="20b8", description="A100X")


def parsed(fact: FactType, case: str) -> Any:
    out = probe(CASES / fact.id / f"{case}.txt")
    return fact.parse(out.output, out.rc)


def found(
    *,
    podman: str = "debian13",
    docker: str = "not-found",
    config: str = "unconfigured",
    cdi: str = "current",
    refresh: str = "armed",
) -> ContainerFacts:
    return ContainerFacts(
        runtimes={
            "docker": parsed(DockerVersionFact, docker),
            "containerd": parsed(ContainerdVersionFact, "debian13"),
            "podman": parsed(PodmanVersionFact, podman),
        },
        config=parsed(ContainerConfigFact, config),
        cdi=parsed(CdiSpecsFact, cdi),
        refresh=parsed(RefreshUnitsFact, refresh),
    )


def machine(toolkit: str | None = "1.18.2-1", driver: str = "580.95.05", **containers: str) -> Facts:
    """An A100X host with the driver loaded, the toolkit's packages at ``toolkit`` and ``containers``."""
    packages = tuple(pkg(n, toolkit) for n in TOOLKIT) if toolkit else ()
    return fresh_ubuntu(
        driver=LoadedDriver(version=DriverVersion(driver), flavor="open"),
        nvidia_pci=(GPU,),
        package_locks=PackageLocks(),  # no pins written yet
        packages=packages,
        containers=found(**containers),
    )


def wanted(**changes: Any) -> dict[str, Any]:
    return {"runtime": "podman", "toolkit": "1.18.2", **changes}


def plan_of(facts: Facts, **containers: Any) -> Plan:
    s = spec(python=None, cuda=None, driver__source="preinstalled", containers=wanted(**containers))
    return make_plan(s, facts, CATALOG)


def steps(plan: Plan) -> list[Step]:
    return [s for s in plan.steps if s.component is Component.CONTAINERS]


def test_a_fresh_podman_host_gets_the_four_packages_at_one_release_the_cdi_spec_and_the_rule() -> None:
    plan = plan_of(machine(toolkit=None, cdi="none", config="docker-configured"))
    packages, runtime, cdi, rule = steps(plan)
    assert packages.action is Action.INSTALL and packages.packages == tuple(f"{n}=1.18.2-*" for n in TOOLKIT)
    assert runtime.action is Action.NOOP and "podman reads the CDI spec itself" in runtime.reason
    assert cdi.action is Action.CONFIGURE and cdi.target == "/var/run/cdi/nvidia.yaml"
    assert "nvidia-cdi-refresh.path" in cdi.reason
    assert rule.action is Action.CONFIGURE and rule.target == "/lib/udev/rules.d/71-nvidia-dev-char.rules"
    # Held with the stack, pinned with the stack, and one dict that fits the role's argument specs.
    holds = next(s for s in plan.steps if s.component is Component.HOLDS)
    assert set(TOOLKIT) <= set(holds.packages)
    pins = plan.role_vars("nvidia_repository")["nvidia_repository_preferences"]  # type: ignore[index]
    assert "Package: nvidia-container-toolkit* libnvidia-container*\nPin: version 1.18.2-*" in pins
    assert plan_problems(plan.extravars["roles"]) == []
    role = plan.role_vars("nvidia_container_toolkit")
    assert role is not None and role["nvidia_container_toolkit_cdi_generate"] is True
    assert role["nvidia_container_toolkit_configure_argv"] == []
    key = plan.extravars["keys"]["nvidia_container_toolkit"]["nvidia_container_toolkit_keyring_src"]
    assert key == {
        "url": "https://nvidia.github.io/libnvidia-container/gpgkey",
        "file": None,
        "hosts": ["nvidia.github.io"],
        "fingerprint": "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
    }
    assert "Signed-By: /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg C95B321B" in str(
        role["nvidia_container_toolkit_source"]
    )


def test_a_converged_host_plans_nothing_for_containers_and_says_why() -> None:
    plan = plan_of(machine())
    assert [s.action for s in steps(plan)] == [Action.NOOP] * 4
    reasons = " | ".join(s.reason for s in steps(plan))
    assert "NVIDIA Container Toolkit 1.18.2 installed" in reasons
    assert "/var/run/cdi/nvidia.yaml names driver 580.95.05's libraries and devices 0, GPU-" in reasons
    assert "keeps the /dev/char links" in reasons
    assert plan.role_vars("nvidia_container_toolkit") is None


def test_a_cdi_spec_left_naming_the_previous_driver_is_regenerated() -> None:
    cdi = steps(plan_of(machine(cdi="stale-after-upgrade")))[2]
    assert cdi.action is Action.CONFIGURE
    assert cdi.current == "names driver 580.82.07's libraries, the driver is 580.95.05 (a driver change)"


def test_a_driver_change_in_the_plan_regenerates_the_spec_after_it() -> None:
    facts = machine(driver="580.82.07", cdi="stale-after-upgrade")
    s = spec(python=None, cuda=None, containers=wanted())
    plan = make_plan(
        s.model_copy(update={"driver": s.driver.model_copy(update={"source": "nvidia-repo"})}), facts, CATALOG
    )
    cdi = steps(plan)[2]
    assert cdi.action is Action.CONFIGURE and cdi.current == "the driver changes in this plan"
    assert plan.role_vars("nvidia_container_toolkit")["nvidia_container_toolkit_cdi_generate"] is True  # type: ignore[index]


def test_toolkit_packages_at_mixed_versions_are_moved_together() -> None:
    facts = machine()
    mixed = tuple(pkg(n, "1.17.8-1" if n.startswith("lib") else "1.18.2-1") for n in TOOLKIT)
    packages = steps(plan_of(facts.model_copy(update={"packages": mixed})))[0]
    assert packages.action is Action.UPGRADE and len(packages.packages) == 4
    assert "mixed versions (nvidia-container-toolkit 1.18.2" in packages.reason
    assert (
        "libnvidia-container1 1.17.8" in packages.reason
        and "exactly the toolkit's version" in packages.reason
    )


def test_a_failed_refresh_service_is_rearmed() -> None:
    cdi = steps(plan_of(machine(refresh="start-limit-hit")))[2]
    assert cdi.action is Action.CONFIGURE
    assert cdi.current == "nvidia-cdi-refresh.path, nvidia-cdi-refresh.service failed"


@pytest.mark.parametrize(
    ("config", "action", "argv"),
    [
        (
            "unconfigured",
            Action.CONFIGURE,
            ["nvidia-ctk", "runtime", "configure", "--runtime=docker", "--cdi.enabled"],
        ),
        ("docker-configured", Action.NOOP, []),
    ],
)
def test_docker_is_configured_once_with_cdi_on(config: str, action: Action, argv: list[str]) -> None:
    plan = plan_of(machine(docker="debian13", config=config), runtime="docker")
    runtime = steps(plan)[1]
    assert runtime.action is action
    role = plan.role_vars("nvidia_container_toolkit") or {}
    assert role.get("nvidia_container_toolkit_configure_argv", []) == argv
    if action is Action.CONFIGURE:
        assert role["nvidia_container_toolkit_runtime_service"] == "docker"


def test_containerd_with_nvidias_drop_in_imported_is_configured() -> None:
    runtime = steps(plan_of(machine(config="containerd-drop-in"), runtime="containerd"))[1]
    assert (
        runtime.action is Action.NOOP
        and "/etc/containerd/config.toml names the nvidia runtime" in runtime.reason
    )


def test_a_config_file_that_does_not_parse_is_rewritten_not_trusted() -> None:
    runtime = steps(plan_of(machine(docker="debian13", config="broken"), runtime="docker"))[1]
    assert runtime.action is Action.CONFIGURE and runtime.current is not None
    assert runtime.current.startswith("unreadable (/etc/docker/daemon.json is not JSON")


def _blockers(plan: Plan) -> dict[str, str]:
    return {b.rule: b.message for b in plan.blockers}


def test_an_unknown_toolkit_release_is_refused_by_validate_and_plan(tmp_path: Path) -> None:
    plan = plan_of(machine(), toolkit="1.99.0")
    message = _blockers(plan)["containers-toolkit-unknown"]
    assert message.startswith(
        "containers.toolkit 1.99.0 is not an NVIDIA Container Toolkit release the catalog knows"
    )
    assert steps(plan) == []
    path = tmp_path / "spec.yaml"
    text = (
        (ROOT / "specs" / "h200-containers.yaml")
        .read_text()
        .replace('toolkit: "1.18.2"', 'toolkit: "1.99.0"')
    )
    path.write_text(text)
    result = invoke("validate", str(path))
    assert result.exit_code == 1 and "containers-toolkit-unknown" in result.output


def test_an_unknown_runtime_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    text = (
        (ROOT / "specs" / "h200-containers.yaml").read_text().replace("runtime: docker ", "runtime: cri-o ")
    )
    path.write_text(text)
    result = invoke("validate", str(path))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert "containers.runtime" in lines[0] and "'docker', 'containerd' or 'podman'" in lines[0]


def test_a_host_without_nvidia_gpus_is_refused() -> None:
    facts = machine().model_copy(update={"nvidia_pci": ()})
    assert "this host has no NVIDIA GPU" in _blockers(plan_of(facts))["containers-no-gpu"]


def test_a_runtime_that_is_not_installed_is_refused() -> None:
    message = _blockers(plan_of(machine(), runtime="docker"))["containers-runtime-missing"]
    assert message == (
        "containers.runtime docker is not usable on this host: docker: not found; install the "
        "distribution's docker first"
    )


def test_a_runtime_too_old_for_cdi_v070_is_refused_with_the_way_out() -> None:
    old = machine().model_copy(
        update={
            "containers": found().model_copy(
                update={
                    "runtimes": {
                        "podman": parsed(PodmanVersionFact, "debian13").model_copy(
                            update={"version": DottedVersion("4.3.1")}
                        )
                    }
                }
            )
        }
    )
    message = _blockers(plan_of(old, toolkit="1.19.1"))["containers-cdi-version"]
    assert "podman 4.3.1 reads CDI specs older than v0.7.0" in message and "podman >= 5.1.0" in message
    assert "containers-cdi-version" not in _blockers(plan_of(old, toolkit="1.19.0"))


def test_a_capture_without_the_container_probes_is_not_refused_and_is_planned() -> None:
    facts = machine().model_copy(update={"containers": None})
    plan = plan_of(facts)
    assert not plan.blockers
    assert steps(plan)[2].current == "not observed: not probed"


def test_a_toolkit_without_refresh_units_writes_the_persistent_spec() -> None:
    cdi = steps(plan_of(machine(toolkit=None, cdi="none"), toolkit="1.17.8"))[2]
    assert cdi.target == "/etc/cdi/nvidia.yaml" and "no refresh units (from 1.18.0)" in cdi.reason


# --- verify -----------------------------------------------------------------------------------


def _ok(stdout: str = "") -> dict[str, Any]:
    return {"rc": 0, "stdout": stdout, "stderr": "", "seconds": 0.1}


HOST = "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H200 (UUID: GPU-bbbb)\n"


def listed(text: str, rc: int = 0) -> dict[str, Any]:
    """What ``cat`` reads back of a listing the container's process wrote."""
    return _ok(f"{text}rc={rc}\n")


def part(before: Any, reload: Any, after: Any) -> dict[str, Any]:
    return {"commands": [_ok(HOST), _ok(), _ok(), _ok("abc\n"), before, reload, after, _ok(), _ok()]}


def _verify(part: dict[str, Any], facts: Facts, **containers: Any) -> dict[str, tuple[str, str]]:
    s = spec(python=None, cuda=None, containers=wanted(**containers))
    inputs = VerifyInputs(
        facts=facts, gpu_run=Unknown(unknown="none"), observed={"containers": containers_from(s, part)}
    )
    again = VerifyInputs.model_validate_json(inputs.model_dump_json())
    assert again == inputs  # a saved inputs.json replays the run
    results = evaluate(s, again, CATALOG, shipped_limits(), OBSERVER.checks)
    return {r.id: (r.status, r.detail) for r in results}


def test_the_job_runs_a_container_reloads_systemd_and_lists_again_as_argvs() -> None:
    s = spec(containers=wanted(verify_image="/srv/rootfs"))
    job = host_job(s)
    assert job is not None
    argvs = [c["argv"] for c in job["parts"]["containers"]["commands"]]
    assert argvs == commands(s.containers)  # type: ignore[arg-type]
    assert argvs[0] == ["nvidia-smi", "-L"] and argvs[5] == ["systemctl", "daemon-reload"]
    run = argvs[3]
    assert run[:3] == ["podman", "run", "-d"] and "nvidia.com/gpu=all" in run
    assert run[-5:-2] == ["--rootfs", "/srv/rootfs", "sh"] and run[-1].count("nvidia-smi -L") == 2
    # The reload comes after the first listing was read, the second listing after the reload.
    assert "before" in argvs[4][-1] and argvs[6][-1].startswith("touch /run/provision-verify-gpus/go")


def test_a_container_that_sees_every_gpu_before_and_after_the_reload_passes() -> None:
    found_ = _verify(part(listed(HOST), _ok(), listed(HOST)), machine(), verify_image="ubuntu:24.04")
    assert found_["container-gpus"] == ("pass", "GPU-aaaa, GPU-bbbb")
    assert found_["container-gpus-after-daemon-reload"][0] == "pass"
    assert found_["cdi-spec-driver"] == ("pass", "/var/run/cdi/nvidia.yaml")


def test_gpus_lost_after_the_reload_and_a_stale_spec_fail_with_what_is_missing() -> None:
    lost = listed("Failed to initialize NVML: Unknown Error\n", rc=255)
    found_ = _verify(
        part(listed(HOST), _ok(), lost), machine(cdi="stale-after-upgrade"), verify_image="ubuntu:24.04"
    )
    assert found_["container-gpus"][0] == "pass"
    assert found_["container-gpus-after-daemon-reload"] == (
        "fail",
        "nvidia-smi -L in the podman container after daemon-reload exited 255: "
        "Failed to initialize NVML: Unknown Error",
    )
    assert found_["cdi-spec-driver"] == ("fail", "/var/run/cdi/nvidia.yaml names 580.82.07")
    one = part(listed("GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\n"), _ok(), listed(HOST))
    assert _verify(one, machine(), verify_image="ubuntu:24.04")["container-gpus"] == (
        "fail",
        "missing in the container: GPU-bbbb",
    )


def test_without_an_image_or_systemd_the_checks_skip_with_the_reason() -> None:
    found_ = _verify({"commands": [_ok(HOST)]}, machine())
    assert found_["container-gpus"] == ("skip", "containers.verify_image is not set: no container was run")
    no_systemd = part(listed(HOST), {"missing": True}, listed(HOST))
    after = _verify(no_systemd, machine(), verify_image="ubuntu:24.04")["container-gpus-after-daemon-reload"]
    assert after == ("skip", "systemctl daemon-reload: not found on the host")


def test_a_container_that_never_lists_its_gpus_fails_with_the_wait() -> None:
    silent = {
        "rc": 1,
        "stdout": "",
        "stderr": "cat: /run/provision-verify-gpus/before: No such file or directory\n",
    }
    found_ = _verify(part(silent, _ok(), silent), machine(), verify_image="ubuntu:24.04")
    status, detail = found_["container-gpus"]
    assert status == "fail" and "the container wrote no listing within 30 s" in detail


def test_a_container_that_does_not_start_fails_both_checks_with_the_runtimes_words() -> None:
    refused = {
        "rc": 125,
        "stdout": "",
        "stderr": "Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all\n",
    }
    found_ = _verify({"commands": [_ok(HOST), _ok(), _ok(), refused]}, machine(), verify_image="ubuntu:24.04")
    reason = (
        "podman run exited 125: Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all"
    )
    assert found_["container-gpus"] == found_["container-gpus-after-daemon-reload"] == ("fail", reason)


def test_a_runtime_that_is_not_there_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # Seen on the real H200 (no docker): each read of a listing waited out its 30 s for a file that no
    # container would ever write, and verify took 61 s. The waits and the reload now follow the start.
    from provision.verify import hostprobe

    ran: list[list[str]] = []

    def command(argv: list[str], timeout: float) -> dict[str, Any]:
        ran.append(argv)
        if argv[0] == "docker":
            return {"missing": True}
        return {"rc": 0, "stdout": HOST if argv[0] == "nvidia-smi" else "", "stderr": "", "seconds": 0.0}

    monkeypatch.setattr(hostprobe, "command", command)
    s = spec(python=None, cuda=None, containers=wanted(runtime="docker", verify_image="ubuntu:24.04"))
    job = host_job(s)
    assert job is not None
    answer = hostprobe.run_job(job)["parts"]["containers"]
    assert not any(a[0] == "systemctl" or (a[0] == "sh" and "until [ -e" in a[-1]) for a in ran), ran
    assert [c.get("skipped") for c in answer["commands"][4:7]] == ["command 3 did not succeed"] * 3
    found_ = _verify(answer, machine(), runtime="docker", verify_image="ubuntu:24.04")
    assert found_["container-gpus"] == ("fail", "docker run: not found on the host")
    assert found_["container-gpus-after-daemon-reload"] == ("fail", "docker run: not found on the host")
