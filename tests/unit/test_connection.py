"""Which Python runs on each host, by one rule for direct detection and every play (issue 31).

The rule's cases read what Ansible's own inventory manager resolved; the failure case is the
event Ansible 2.19 gave for a pyenv shim found by interpreter discovery on a local connection.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from provision import ansible, connection
from provision.detect import direct

PYENV_SHIM = {
    "ansible_facts": {"discovered_interpreter_python": "/root/.pyenv/shims/python3.13"},
    "changed": False,
    "module_stderr": "pyenv: python3.13: command not found\n\nThe `python3.13' command exists in these "
    "Python versions:\n  3.13.0\n\nNote: See 'pyenv help global' for tips on allowing multiple\n",
    "module_stdout": "",
    "msg": "Module result deserialization failed: No start of json char found",
    "rc": 127,
}


@pytest.fixture()
def inventory(tmp_path: Path) -> Path:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "lab.yml").write_text("ansible_connection: local\n", encoding="utf-8")
    path = tmp_path / "hosts.ini"
    path.write_text(
        "here ansible_connection=local\n"
        "named ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
        "far ansible_host=10.0.0.9\n"
        "box ansible_connection=docker\n"
        "[lab]\nbygroup\n",
        encoding="utf-8",
    )
    return path


def test_a_local_host_naming_no_interpreter_runs_provisions_own(inventory: Path) -> None:
    hosts = connection.resolved_hosts(str(inventory), None)
    assert list(hosts) == ["here", "named", "far", "box", "bygroup"]
    python = {name: connection.host_python(v) for name, v in hosts.items()}
    assert python == {
        "here": sys.executable,
        "named": "/usr/bin/python3",
        "far": None,  # discovery on the host, in a play; python3 for direct detection
        "box": None,
        "bygroup": sys.executable,  # local by group_vars
    }
    layer = connection.interpreter_layer(hosts)
    chosen = {h: {"ansible_python_interpreter": sys.executable} for h in ("here", "bygroup")}
    assert layer == {"all": {"hosts": chosen}}


def test_the_configured_interpreter_is_kept(inventory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible import constants  # type: ignore[import-untyped]

    real = constants.config.get_config_value
    monkeypatch.setattr(
        constants.config,
        "get_config_value",
        lambda name, *a, **k: "/opt/py/bin/python3" if name == "INTERPRETER_PYTHON" else real(name, *a, **k),
    )
    hosts = connection.resolved_hosts(str(inventory), None)
    assert connection.host_python(hosts["here"]) == "/opt/py/bin/python3"
    assert connection.interpreter_layer(hosts) is None


def test_direct_detection_and_the_play_use_the_same_interpreter(inventory: Path, tmp_path: Path) -> None:
    argv = direct.connections(str(inventory), "here")["here"]
    assert argv == [sys.executable, "-c", direct.BOOT]
    run = tmp_path / "run"
    run.mkdir()
    sources = connection.inventory_sources(run, inventory, "here")
    assert isinstance(sources, list) and sources[0] == str(inventory)
    layer = json.loads(Path(sources[1]).read_text(encoding="utf-8"))
    assert layer["all"]["hosts"]["here"] == {"ansible_python_interpreter": sys.executable}


def test_inventory_text_and_hosts_needing_nothing(tmp_path: Path) -> None:
    far = "far ansible_host=10.0.0.9\n"
    assert connection.inventory_sources(tmp_path, far, None) == far
    here = "here ansible_connection=local\n"
    sources = connection.inventory_sources(tmp_path, here, None)
    assert isinstance(sources, list)
    assert Path(sources[0]).read_text(encoding="utf-8") == here


def test_an_unreadable_inventory_is_left_to_the_play_to_explain(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("all: [unclosed\n", encoding="utf-8")
    assert connection.inventory_sources(tmp_path, bad, None) == str(bad)


def test_an_interpreter_that_never_ran_is_named_with_its_first_words() -> None:
    assert ansible.failure_message(PYENV_SHIM) == (
        "the discovered Python /root/.pyenv/shims/python3.13 printed no module result (rc 127): "
        "pyenv: python3.13: command not found (set ansible_python_interpreter for the host)"
    )


def test_a_command_reads_its_inventory_once(inventory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from provision import inventory as inventory_mod

    inventory_mod.forget()
    reads: list[Path] = []
    real = inventory_mod._manager

    def counted(path: Path, error: type[Exception]) -> object:
        reads.append(path)
        return real(path, error)  # type: ignore[arg-type]

    monkeypatch.setattr(inventory_mod, "_manager", counted)
    mapped = inventory_mod.read_inventory(inventory, "lab,here")  # the host mapping (load_fleet)
    assert [h.name for h in mapped.hosts] == ["here", "bygroup"]
    assert direct.connections(str(inventory), "here")["here"] == [sys.executable, "-c", direct.BOOT]
    assert connection.inventory_sources(inventory.parent, inventory, "here,bygroup") != str(inventory)
    assert reads == [inventory]
    inventory_mod.forget()  # as the next command starts
    inventory_mod.read_inventory(inventory)
    assert reads == [inventory, inventory]
