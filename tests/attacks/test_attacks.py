"""Each attack of an unprivileged user on provision run as root: planted as nobody, refused by the real
CLI in one line naming the path and its owner, with nothing changed (docs/security.md#the-trust-rule).

Where the attack would work without the rule, a control runs the same with root's own files and
shows the planted code does run: the refusal, not an accident of the set-up, is what stops it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from typer.testing import CliRunner

from provision.detect.raw import read_raw
from provision.lock import store
from provision.reboot import record
from tests.attacks.conftest import NOBODY, REPO, Lab

SPEC = REPO / "specs" / "h200-ubuntu2404.yaml"
RAW = REPO / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-spec"
INPUTS = REPO / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json"
OWNER = f"uid {NOBODY} (nobody)"


def refused(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The one ``error:`` line of a refused command (exit 1, no traceback), holding ``words``."""
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def spec_with(lab: Lab, venv: Path, name: str = "spec.yaml", **python: str) -> Path:
    text = SPEC.read_text().replace("venv: /opt/torch/.venv", f"venv: {venv}")
    for key, value in python.items():
        text = text.replace("  venv: ", f"  {key}: {value}\n  venv: ", 1)
    path = lab.root / name
    path.write_text(text)
    return path


def fake_gpus(lab: Lab) -> str:
    """A bin directory whose nvidia-smi prints the H200's capture: verify then runs the venv."""
    bin_dir = lab.root / "bin"
    bin_dir.mkdir()
    raw = read_raw(RAW)
    for probe_id in ("query-gpu", "topo-m"):
        (bin_dir / f"{probe_id}.out").write_text(raw[probe_id].output)
    script = (
        f'#!/bin/sh\ncase "$1" in topo) cat {bin_dir}/topo-m.out;; *) cat {bin_dir}/query-gpu.out;; esac\n'
    )
    (bin_dir / "nvidia-smi").write_text(script)
    (bin_dir / "nvidia-smi").chmod(0o755)
    return str(bin_dir)


def root_venv(lab: Lab) -> tuple[Path, Path]:
    venv = lab.root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv, next((venv / "lib").glob("python3*")) / "site-packages"


# 1. A venv another user can write: a .pth in site-packages would run as root.


def test_verify_does_not_run_a_venv_whose_site_packages_another_user_can_write(lab: Lab) -> None:
    venv, site = root_venv(lab)
    spec, gpus = spec_with(lab, venv), fake_gpus(lab)
    ran = lab.root / "ran"
    (site / "control.pth").write_text(f"import os; open({str(ran)!r}, 'w').close()\n")
    lab.provision("verify", str(spec), path_prefix=gpus)
    assert ran.exists(), "control: root's own venv runs, .pth files included"
    ran.unlink()
    (site / "control.pth").unlink()

    os.chown(site, NOBODY, NOBODY)  # "the lab's venv: let eve pip install into it"
    lab.as_eve(f"echo \"import os; open({str(ran)!r}, 'w').close()\" > {site}/evil.pth")
    done = lab.provision("verify", str(spec), path_prefix=gpus)
    said = done.stdout + done.stderr
    assert "the venv is not trusted" in said and f"{site}: a directory owned by {OWNER}" in said, said
    flat = " ".join(said.split())
    assert "Nothing on the GPUs was measured" in flat and "A GPU missing" not in flat, said
    assert not ran.exists()


def test_the_roles_trust_task_refuses_the_same_venv_through_ansible(lab: Lab) -> None:
    venv, site = root_venv(lab)
    play = lab.root / "play.yml"
    task = {"provision_trust": {"path": str(venv), "check": "venv"}}
    play.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    run = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        "localhost,",
        "-c",
        "local",
        str(play),
    ]
    env = os.environ | {"ANSIBLE_LIBRARY": str(REPO / "playbooks" / "library"), "ANSIBLE_NOCOLOR": "1"}
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    trusted = subprocess.run(run, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert trusted.returncode == 0, trusted.stdout
    os.chown(site, NOBODY, NOBODY)
    planted = subprocess.run(run, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert planted.returncode == 2 and f"{site}: a directory owned by {OWNER}" in planted.stdout, (
        planted.stdout
    )
    for role in ("python_env", "vllm_serve"):  # the roles run that very task before any venv or pip command
        for family in ("Debian", "RedHat"):
            tasks = _role_tasks(REPO / "playbooks" / "roles" / role / "tasks", family)
            first = next(i for i, t in enumerate(tasks) if "_venv" in json.dumps(t))
            assert tasks[first]["provision_trust"]["check"] == "venv", (role, family)


def _role_tasks(tasks_dir: Path, family: str) -> list[dict[str, Any]]:
    """The role's tasks in the order they run on ``family``: ``main.yml`` with its include of
    ``{{ ansible_os_family }}.yml`` replaced by that family's file (absent: nothing)."""
    out: list[dict[str, Any]] = []
    for task in YAML(typ="safe").load((tasks_dir / "main.yml").read_text()):
        include = task.get("ansible.builtin.include_tasks")
        if include == "{{ ansible_os_family }}.yml":
            path = tasks_dir / f"{family}.yml"
            out += YAML(typ="safe").load(path.read_text()) if path.exists() else []
        else:
            out.append(task)
    return out


# 2. A runs directory another user controls (ansible-runner's env/ files, the support bundle).


@pytest.mark.parametrize("command", ["apply", "verify"])
def test_a_runs_directory_another_user_controls_is_refused_before_any_work(lab: Lab, command: str) -> None:
    lab.as_eve(f"mkdir -p {lab.eve}/runs/env")
    spec = spec_with(lab, lab.root / "venv")
    args = [command, str(spec), "--runs-dir", str(lab.eve / "runs")] + (
        ["--dry-run"] if command == "apply" else []
    )
    refused(lab.provision(*args), f"--runs-dir {lab.eve}/runs", OWNER)
    assert sorted(p.name for p in (lab.eve / "runs").iterdir()) == ["env"]


# 3. An inventory (or its group_vars) another user wrote: its interpreter would run as root.


def _evil_interpreter(lab: Lab, where: Path, ran: Path) -> Path:
    evil = where / "python"
    lab.as_eve(f"printf '#!/bin/sh\\ntouch {ran}\\nexit 1\\n' > {evil}; chmod 755 {evil}")
    return evil


def test_plan_i_does_not_run_an_inventory_another_user_wrote(lab: Lab) -> None:
    ran = lab.root / "ran"
    evil = _evil_interpreter(lab, lab.eve, ran)
    line = f"localhost ansible_connection=local ansible_python_interpreter={evil}\n"
    spec = spec_with(lab, lab.root / "venv")
    control = lab.root / "hosts.ini"  # root's own inventory naming that interpreter: it runs
    control.write_text(line.replace(str(evil), str(lab.root / "python")))
    (lab.root / "python").write_text(f"#!/bin/sh\ntouch {ran}\nexit 1\n")
    (lab.root / "python").chmod(0o755)
    lab.provision("plan", str(spec), "-i", str(control))
    assert ran.exists(), "control: the inventory's interpreter runs as root"
    ran.unlink()
    lab.as_eve(f"printf '{line}' > {lab.eve}/hosts.ini")
    refused(lab.provision("plan", str(spec), "-i", str(lab.eve / "hosts.ini")), f"{lab.eve}/hosts.ini", OWNER)
    assert not ran.exists()


def test_plan_i_does_not_read_group_vars_another_user_wrote(lab: Lab) -> None:
    ran = lab.root / "ran"
    inventory = lab.root / "inv" / "hosts.ini"
    inventory.parent.mkdir()
    inventory.write_text("localhost ansible_connection=local\n")
    group_vars = inventory.parent / "group_vars"
    group_vars.mkdir()
    os.chown(group_vars, NOBODY, NOBODY)
    evil = _evil_interpreter(lab, lab.eve, ran)
    lab.as_eve(f"echo 'ansible_python_interpreter: {evil}' > {group_vars}/all.yml")
    spec = spec_with(lab, lab.root / "venv")
    refused(lab.provision("plan", str(spec), "-i", str(inventory)), str(group_vars), OWNER)
    assert not ran.exists()


def test_resume_checks_the_inventory_its_record_names(lab: Lab) -> None:
    ran = lab.root / "ran"
    evil = _evil_interpreter(lab, lab.eve, ran)
    lab.as_eve(
        f"printf 'localhost ansible_connection=local ansible_python_interpreter={evil}\\n' > {lab.eve}/hosts"
    )
    spec, run_dir = spec_with(lab, lab.root / "venv"), lab.root / "run"
    run_dir.mkdir(mode=0o700)
    found = record.new_record(
        spec, inventory=lab.eve / "hosts", hosts=["localhost"], consented=[], mok_pending=[], run_dir=run_dir,
        runs_dir=lab.root / "runs",
    )  # fmt: skip
    record.write_record(found, run_dir / "resume.json")
    done = lab.provision("resume", str(run_dir / "resume.json"))
    refused(done, f"{lab.eve}/hosts", OWNER)
    assert not ran.exists()


# 4. A saved plan another user made (from a copy of root's facts, with a spec of theirs).

_FORGE = r"""
import hashlib, hmac, json, os, sys
doc = json.load(open(sys.argv[1]))
doc["spec"]["python"]["index_url"] = "https://evil.example/simple/"
def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
def digest(value):
    return hashlib.sha256(canonical(value)).hexdigest()
seal = doc["seal"]
seal["parts"] = {name: digest(doc[name]) for name in seal["parts"]}
body = json.dumps({"parts": seal["parts"], "tool_version": seal["tool_version"]}, sort_keys=True,
                  separators=(",", ":")).encode()
if sys.argv[3] == "old":
    seal.pop("scheme"), seal.pop("key_id")
    seal["digest"] = hashlib.sha256(body).hexdigest()
else:
    key = os.urandom(32)
    seal["digest"] = hmac.new(key, body, hashlib.sha256).hexdigest()
    seal["key_id"] = hashlib.sha256(key).hexdigest()[:16]
json.dump(doc, open(sys.argv[2], "w"))
"""


@pytest.mark.parametrize(
    ("scheme", "said"), [("old", "an older release's seal"), ("own-key", "sealed with another key")]
)
def test_a_plan_another_user_forged_is_not_applied(lab: Lab, scheme: str, said: str) -> None:
    spec, ours = spec_with(lab, lab.root / "venv"), lab.root / "plan.json"
    assert lab.provision("plan", str(spec), "--from-raw", str(RAW), "--out", str(ours)).returncode in (0, 2)
    (lab.eve / "forge.py").write_text(_FORGE)
    lab.as_eve(f"/usr/bin/python3 {lab.eve}/forge.py {ours} {lab.eve}/plan.json {scheme}")
    refused(lab.provision("apply", str(lab.eve / "plan.json"), "--dry-run"), f"{lab.eve}/plan.json", OWNER)
    copied = lab.root / "copied.json"  # root copies it into a place of its own: still not root's seal
    copied.write_bytes((lab.eve / "plan.json").read_bytes())
    refused(lab.provision("apply", str(copied), "--dry-run"), said)


# 5. Locks others can write (rollback plans from them); outputs through planted links; the venv
# probe following pyvenv.cfg.


def test_lock_show_and_rollback_refuse_locks_another_user_can_write(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    locks = lab.root / "lib" / "locks"
    locks.mkdir(parents=True)
    os.chown(locks, NOBODY, NOBODY)
    lab.as_eve(f"echo '{{\"number\": 1}}' > {locks}/0001.json")
    monkeypatch.setattr(store, "LOCK_DIRECTORY", lab.root / "lib")  # this machine's /var/lib/provision
    from provision.cli import cli

    for args in (["lock", "show"], ["rollback", "--dry-run"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert f"not trusted: {locks}: a directory owned by {OWNER}" in " ".join(result.output.split())


@pytest.mark.parametrize("option", ["plan --out", "checklist -o", "verify --junit", "detect --save-raw"])
def test_no_output_is_written_through_a_link_another_user_planted(lab: Lab, option: str) -> None:
    precious = lab.root / "precious"
    precious.write_text("root's file\n")
    if option == "detect --save-raw":  # a directory is written into: the link leads to root's own
        precious = lab.root / "precious-dir"
        precious.mkdir()
    name = {
        "plan --out": "plan.json",
        "checklist -o": "list.md",
        "verify --junit": "j.xml",
        "detect --save-raw": "raw",
    }
    target = lab.sticky / name[option]
    lab.as_eve(f"ln -s {precious} {target}")
    spec = spec_with(lab, lab.root / "venv")
    command, flag = option.split()
    args = {
        "plan": ["plan", str(spec), "--from-raw", str(RAW), "--out", str(target)],
        "checklist": ["checklist", str(spec), "-o", str(target)],
        "verify": ["verify", str(spec), "--inputs", str(INPUTS), "--junit", str(target)],
        "detect": ["detect", "--from-raw", str(RAW), "--save-raw", str(target)],
    }[command]
    refused(lab.provision(*args), flag, str(target), OWNER)
    unchanged = not list(precious.iterdir()) if precious.is_dir() else precious.read_text() == "root's file\n"
    assert unchanged and target.is_symlink()


@pytest.mark.parametrize("target", ["secret", "/dev/zero"])
def test_the_venv_probe_does_not_read_what_pyvenv_cfg_links_to(lab: Lab, target: str) -> None:
    secret = lab.root / "secret"
    secret.write_text("version = 3.12.3\ntoken = TOPSECRET-4f2a\n")
    secret.chmod(0o600)
    linked = secret if target == "secret" else Path(target)
    lab.as_eve(
        f"mkdir -p {lab.eve}/venv/lib/python3.12/site-packages && ln -s {linked} {lab.eve}/venv/pyvenv.cfg"
    )
    spec = spec_with(lab, lab.eve / "venv")
    done = lab.provision("detect", str(spec), "--save-raw", str(lab.root / "raw"), timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    saved = {p.name: p for p in (lab.root / "raw").iterdir()}
    assert "TOPSECRET" not in saved["venv.txt"].read_text() + saved["torch.txt"].read_text() + done.stdout
    assert "Too many levels of symbolic links" in saved["venv.txt"].read_text()
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in saved.values())


# 6. Tokens in an index URL.


@pytest.mark.parametrize(
    "url",
    [
        "https://mirror.example/simple/?token=ghp_x",
        "https://dl.cloudsmith.io/Xq7RbN3kLmP9sT2vWz4Y/acme/simple/",
    ],
)
def test_a_token_in_an_index_url_never_reaches_a_plan(lab: Lab, url: str) -> None:
    spec = spec_with(lab, lab.root / "venv", index_url=url)
    out = lab.root / "plan.json"
    done = lab.provision("plan", str(spec), "--from-raw", str(RAW), "--out", str(out))
    line = refused(done, "python.index_url", "which may carry a secret")
    assert "ghp_x" not in line and "Xq7RbN3kLmP9sT2vWz4Y" not in line and not out.exists()
