"""provision's Ansible paths through a real ansible-playbook (local connection, no root): one play
with its events and variables, and the detection play against the one-ssh-command path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from provision import ansible
from provision.detect import direct
from provision.detect.runner import detect_remote

LOCAL = f"local ansible_connection=local ansible_python_interpreter={sys.executable}\n"


def test_a_real_local_play(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    play = [
        {
            "hosts": "all",
            "gather_facts": False,
            "tasks": [{"name": "Say hello.", "ansible.builtin.debug": {"msg": "{{ greeting }}"}}],
        }
    ]
    (project / "hello.yml").write_text(json.dumps(play))
    inventory = f"here ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    seen: list[str] = []
    played = ansible.run_play(
        tmp_path,
        "hello.yml",
        inventory,
        extravars={"greeting": "hi"},
        on_event=lambda e: seen.append(e["event"]),
    )
    assert played.succeeded and played.rc == 0
    assert played.count("ok", "here") == 1
    ok = next(e for e in played.events if e["event"] == "runner_on_ok")
    assert ok["event_data"]["res"]["msg"] == "hi"
    assert "runner_on_ok" in seen and "playbook_on_stats" in seen
    assert not (tmp_path / "env" / "extravars").exists()  # suppress_env_files


def test_the_play_detects_what_one_ssh_command_detects(monkeypatch: pytest.MonkeyPatch) -> None:
    inventory = (
        LOCAL + "refused ansible_host=127.0.0.1 ansible_port=1 ansible_python_interpreter=/usr/bin/python3\n"
    )
    direct_facts = detect_remote(inventory)
    monkeypatch.setenv(direct.ENV_SWITCH, "ansible")
    played = detect_remote(inventory)  # real ansible-playbook: pipelining, free strategy
    assert (
        played["local"].os == direct_facts["local"].os and played["local"].gpus == direct_facts["local"].gpus
    )
    assert played["refused"].os.unknown.startswith("host unreachable")  # type: ignore[union-attr]
    assert direct_facts["refused"].os.unknown.startswith("host unreachable")  # type: ignore[union-attr]
