"""Remote verify over detection's transports: which route each host takes, and each host's cause.

The routes are what Ansible's own inventory manager and ssh plugin resolved. The local cases run
the real verify agent on this machine (the real collector, trust rule and GPU program, with a
stand-in ``nvidia-smi`` on PATH and a venv interpreter that records how it was started, since
this machine has no GPU); the ssh case runs the real ssh client against a closed port.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tarfile
from pathlib import Path

import pytest
from pytest_mock import MockerFixture

from provision import ansible, trust
from provision.detect import direct
from provision.detect.facts import Unknown
from provision.spec.loader import load_spec
from provision.verify import agent
from provision.verify.direct import AGENT_TASK, verify_routed
from provision.verify.hosts import routes_of
from provision.verify.launch import CHILD_ENV
from provision.verify.remote import HostJob
from provision.verify.runs import GpuRun, VerifyInputs

ROOT = Path(__file__).parents[2]
SPEC = ROOT / "specs" / "dual-a100x.yaml"
QUERY_GPU = ROOT / "tests" / "fixtures" / "detect" / "h200-ubuntu2404" / "query-gpu.txt"
HERE = f"ansible_connection=local ansible_python_interpreter={sys.executable}"
SSH = "ansible_host=10.1.2.3 ansible_user=admin ansible_python_interpreter=/usr/bin/python3"


def _routes(tmp_path: Path, lines: str, *, as_root: bool = False) -> dict[str, direct.Route]:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(lines, encoding="utf-8")
    return direct.routes(str(inventory), None, as_root=as_root)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (
            "box ansible_connection=docker",
            "ansible_connection=docker (the direct transport runs local and ssh",
        ),
        ("win ansible_connection=winrm", "ansible_connection=winrm"),
        ("pw ansible_host=10.0.0.9 ansible_password=secret", "a password is set"),
        ("tpl ansible_host=\"{{ lookup('env', 'GPU_HOST') }}\"", "a templated or vaulted ssh option"),
        ("su ansible_host=10.0.0.9 ansible_become=true ansible_become_method=su", "ansible_become_method=su"),
        ("bp ansible_host=10.0.0.9 ansible_become=true ansible_become_password=x", "a become password"),
        ("bf ansible_host=10.0.0.9 ansible_become=true ansible_become_flags=-E", "become_flags '-E'"),
    ],
)
def test_a_connection_the_direct_transport_cannot_do_goes_to_the_play_with_why(
    tmp_path: Path, line: str, why: str
) -> None:
    (found,) = _routes(tmp_path, line + "\n").values()
    assert found.transport == "play" and found.argv is None
    assert found.why is not None and why in found.why, found.why


def test_local_and_ssh_hosts_get_one_command_each(tmp_path: Path) -> None:
    found = _routes(tmp_path, f"here {HERE}\nfar {SSH}\n")
    assert found["here"] == direct.Route("local", [sys.executable, "-c", direct.BOOT])
    far = found["far"]
    assert far.transport == "ssh" and far.argv is not None and far.why is None
    assert far.argv[far.argv.index("-l") + 1] == "admin" and far.argv[-2] == "10.1.2.3"
    assert shlex.split(far.argv[-1]) == ["/usr/bin/python3", "-c", direct.BOOT]


def test_become_is_sudo_non_interactive_each_word_quoted_in_the_remote_command(tmp_path: Path) -> None:
    line = (
        f"far {SSH} ansible_become=true ansible_become_user=\"o'brien x\" ansible_become_flags='-H -S -n'\n"
    )
    (far,) = _routes(tmp_path, line).values()
    assert far.transport == "ssh" and far.argv is not None
    remote = shlex.split(far.argv[-1])  # what the remote shell runs: every word as it was
    assert remote == ["sudo", "-H", "-n", "-u", "o'brien x", "--", "/usr/bin/python3", "-c", direct.BOOT]


def test_as_root_adds_sudo_only_where_the_user_is_not_root(tmp_path: Path) -> None:
    lines = f"admin {SSH}\nroot {SSH.replace('ansible_user=admin', 'ansible_user=root')}\n"
    found = _routes(tmp_path, lines, as_root=True)
    assert [found[h].argv[-1].split()[0] for h in ("admin", "root")] == ["sudo", "/usr/bin/python3"]  # type: ignore[index]


def test_the_switch_sends_every_host_to_the_play_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from provision.hosts import Hosts, HostSpec

    inventory = tmp_path / "hosts.ini"
    inventory.write_text(f"here {HERE}\n", encoding="utf-8")
    monkeypatch.setenv(direct.ENV_SWITCH, "ansible")
    hosts = Hosts(inventory=inventory, specs={"here": HostSpec(load_spec(SPEC), str(SPEC))})
    assert routes_of(hosts) == {"here": direct.Route("play", None, "PROVISION_REMOTE_DETECT=ansible")}


def _job(venv: Path | None = None) -> HostJob:
    return HostJob(venv=str(venv) if venv else None, load_seconds=1.0, gpu_count=1)


def _verify(routes: dict[str, direct.Route], job: HostJob) -> dict[str, VerifyInputs | str]:
    return verify_routed("unused: every host has a command", dict.fromkeys(routes, job), routes)


def test_a_local_host_is_verified_by_the_agent_without_ansible(mocker: MockerFixture) -> None:
    play = mocker.patch.object(ansible, "run_play")
    route = direct.Route("local", [sys.executable, "-c", direct.BOOT])
    got = _verify({"here": route}, _job())["here"]
    assert isinstance(got, VerifyInputs) and got.facts.host == "here"
    assert not isinstance(got.facts.os, Unknown) and not isinstance(got.facts.kernel, Unknown)
    assert got.gpu_run == Unknown(unknown="no GPU work: nvidia-smi: not found")
    play.assert_not_called()


@pytest.fixture
def stand_in_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A venv whose interpreter records its argv and environment, then runs /usr/bin/python3
    (no torch); ``nvidia-smi`` on PATH answers ``--query-gpu`` with the H200 capture's row."""
    if os.geteuid() != 0:
        pytest.skip("the trust rule accepts a venv owned by root here only as root")
    monkeypatch.delenv(trust.SUDO_VAR, raising=False)
    tmp_path.chmod(0o755)
    rows = [line for line in QUERY_GPU.read_text().splitlines()[1:] if not line.startswith("[exit")]
    bin_dir = tmp_path / "bin"
    _script(bin_dir / "nvidia-smi", "cat <<'EOF'\n" + "\n".join(rows) + "\nEOF\n")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    venv = tmp_path / "venv"
    record = f'case "$*" in *gpuload.py*) env > {tmp_path}/env; echo "$@" > {tmp_path}/argv;; esac\n'
    _script(venv / "bin" / "python", record + 'exec /usr/bin/python3 "$@"\n')
    return venv


def _script(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_the_agent_runs_the_gpu_program_as_the_play_does(stand_in_gpu: Path) -> None:
    route = direct.Route("local", [sys.executable, "-c", direct.BOOT])
    got = _verify({"here": route}, _job(stand_in_gpu))["here"]
    assert isinstance(got, VerifyInputs)
    assert (
        isinstance(got.gpu_run, GpuRun)
        and got.gpu_run.error == "ModuleNotFoundError: No module named 'torch'"
    )
    argv = (stand_in_gpu.parent / "argv").read_text().split()
    assert (
        argv[0] == "-I"
        and argv[1].endswith("/gpuload.py")
        and argv[2:]
        == [
            "gpus",
            "--seconds",
            "1.0",
            "--copy-mib",
            "256",
        ]
    )
    env = dict(
        line.split("=", 1) for line in (stand_in_gpu.parent / "env").read_text().splitlines() if "=" in line
    )
    assert {k: env.get(k) for k in CHILD_ENV} == CHILD_ENV
    assert not Path(argv[1]).exists()  # the agent's temporary directory is gone


def test_an_untrusted_venv_is_not_run_and_says_why(stand_in_gpu: Path) -> None:
    stand_in_gpu.chmod(0o777)
    route = direct.Route("local", [sys.executable, "-c", direct.BOOT])
    got = _verify({"here": route}, _job(stand_in_gpu))["here"]
    assert isinstance(got, VerifyInputs) and "the venv is not trusted" in str(got.gpu_run)
    assert not (stand_in_gpu.parent / "argv").exists()


def test_a_program_past_its_deadline_is_killed_with_its_session() -> None:
    ran = agent.run(["sh", "-c", "sleep 30 & sleep 30"], 0.5)
    assert ran["ran"] and "did not complete within 0.5 s" in ran["message"], ran
    assert agent.run(["/nonexistent/program"], 1)["message"].startswith("/nonexistent/program: ")


def _failing(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    _script(path, body)
    return str(path)


def test_each_host_has_its_own_cause(tmp_path: Path) -> None:
    sudo = _failing(tmp_path, "sudo", "echo 'sudo: a password is required' >&2\nexit 1\n")
    chatty = _failing(tmp_path, "python", "echo 'Welcome to the host'\n")
    lines = (
        f"ok {HERE}\n"
        f"nosudo {HERE} ansible_become=true ansible_become_exe={sudo}\n"
        f"chatty ansible_connection=local ansible_python_interpreter={chatty}\n"
        "gone ansible_connection=local ansible_python_interpreter=/nonexistent/python3\n"
        "down ansible_host=127.0.0.1 ansible_port=1 ansible_python_interpreter=/usr/bin/python3\n"
    )
    routes = _routes(tmp_path, lines)
    assert {h: r.transport for h, r in routes.items()} == {
        "ok": "local",
        "nosudo": "local",
        "chatty": "local",
        "gone": "local",
        "down": "ssh",
    }
    got = _verify(routes, _job())
    assert isinstance(got["ok"], VerifyInputs)
    assert got["nosudo"] == f"host failed at '{AGENT_TASK}': rc 1: sudo: a password is required"
    assert str(got["chatty"]).startswith(f"host failed at '{AGENT_TASK}': it printed no JSON: b'Welcome")
    assert got["gone"] == "host unreachable: /nonexistent/python3: not found"
    assert str(got["down"]).startswith("host unreachable: ") and "port 1" in str(got["down"])


def test_only_the_hosts_without_a_command_go_to_the_play(tmp_path: Path, mocker: MockerFixture) -> None:
    play = mocker.patch.object(ansible, "run_play", return_value=ansible.PlayResult("failed", 4, ()))
    routes = _routes(tmp_path, f"here {HERE}\nbox ansible_connection=docker\n")
    got = verify_routed(str(tmp_path / "hosts.ini"), dict.fromkeys(routes, _job()), routes)
    assert play.call_args.kwargs["limit"] == "box"
    assert isinstance(got["here"], VerifyInputs)
    # The play failed before any host reported: its hosts get that cause; the direct ones stand.
    assert str(got["box"]).startswith("host unreachable: ansible-playbook failed (rc 4)"), got["box"]


def test_the_document_and_the_text_name_each_hosts_route(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from provision.cli import cli

    inventory = tmp_path / "hosts.ini"
    sudo = _failing(tmp_path, "sudo", "echo 'sudo: a password is required' >&2\nexit 1\n")
    lines = f"here {HERE} provision_spec={SPEC}\nnosudo {HERE} ansible_become=true ansible_become_exe={sudo}"
    inventory.write_text(lines + f" provision_spec={SPEC}\n", encoding="utf-8")
    hosts = {}
    for one in ("here", "nosudo"):  # one at a time: both are this machine (same-machine refuses the pair)
        args = ["verify", "-i", str(inventory), "-l", one, "--json", "--runs-dir", str(tmp_path)]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, result.output
        hosts |= {h["host"]: h for h in json.loads(result.stdout)["hosts"]}
    assert (
        hosts["here"]["transport"] == {"kind": "local", "why": None} and hosts["here"]["unreachable"] is None
    )
    assert hosts["nosudo"]["unreachable"].endswith("sudo: a password is required")
    with tarfile.open(hosts["here"]["support_bundle"]) as bundle:  # the agent's steps, as events were
        steps = json.load(bundle.extractfile("verify-agent.json"))  # type: ignore[arg-type]
        assert {"host/dmesg-nvidia.txt", "raw/query-gpu.txt"} <= set(bundle.getnames())
    assert set(steps) == {"host_probe", "trust", "gpu"} and steps["trust"]["ran"]
    assert steps["gpu"]["ran"] is False  # no nvidia-smi here: skipped, as the play's task would be
    text = CliRunner().invoke(
        cli, ["verify", "-i", str(inventory), "-l", "nosudo", "--runs-dir", str(tmp_path)]
    )
    assert (
        "nosudo: host failed at 'Run the verify agent.': rc 1: sudo: a password is required (over local)"
        in (" ".join(text.output.split()))
    ), text.output
