"""Every output is written atomically and never through a planted link; run directories, inventories
and their group_vars pass the trust rule before Ansible is started."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provision import ansible, trust
from provision.errors import FactsError, ProvisionError, UntrustedError
from provision.files import check_inventory
from provision.output import PRIVATE, check_output_directory, check_output_file, write_files, write_output

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="files owned by another user need root")


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(trust.SUDO_VAR, raising=False)
    tmp_path.chmod(0o755)
    return tmp_path


def test_an_output_replaces_the_old_file_whole_and_leaves_nothing_beside_it(base: Path) -> None:
    out = base / "plan.json"
    write_output(out, "old\n")
    write_output(out, "new\n", mode=PRIVATE)
    assert out.read_text() == "new\n"
    assert (out.stat().st_mode & 0o777) == PRIVATE
    assert sorted(p.name for p in base.iterdir()) == ["plan.json"]


def test_a_write_that_fails_halfway_keeps_the_old_file_and_no_temporary(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = base / "plan.json"
    write_output(out, "whole old plan\n")

    def killed(fd: int) -> None:
        raise KeyboardInterrupt  # what a Ctrl-C or a kill between write and rename looks like

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        write_output(out, "new plan\n")
    assert out.read_text() == "whole old plan\n"  # never 0 bytes, never a partial file
    assert sorted(p.name for p in base.iterdir()) == ["plan.json"]


def test_a_link_at_the_output_path_is_replaced_never_written_through(base: Path) -> None:
    victim = base / "victim"
    victim.write_text("root's file\n")
    (base / "out.json").symlink_to(victim)
    write_output(base / "out.json", "plan\n")
    assert victim.read_text() == "root's file\n"
    assert not (base / "out.json").is_symlink() and (base / "out.json").read_text() == "plan\n"


@needs_root
def test_a_link_another_user_planted_in_a_sticky_directory_is_refused_before_any_work(base: Path) -> None:
    sticky = base / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    victim = base / "victim"
    victim.write_text("root's file\n")
    (sticky / "plan.json").symlink_to(victim)
    os.lchown(sticky / "plan.json", NOBODY, NOBODY)
    with pytest.raises(UntrustedError, match=r"exists and is owned by uid 65534 \(nobody\)"):
        check_output_file(sticky / "plan.json", "--out")
    with pytest.raises(UntrustedError, match="owned by uid 65534"):
        write_output(sticky / "plan.json", "plan\n")
    assert victim.read_text() == "root's file\n"
    check_output_file(sticky / "mine.json", "--out")  # a new name in /tmp is fine
    write_output(sticky / "mine.json", "plan\n")


@needs_root
def test_an_output_directory_another_user_owns_or_may_write_is_refused(base: Path) -> None:
    theirs = base / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(UntrustedError, match=r"--save-raw .*owned by uid 65534"):
        check_output_directory(theirs, "--save-raw")
    with pytest.raises(UntrustedError, match=r"--out .*owned by uid 65534"):
        check_output_file(theirs / "plan.json", "--out")
    with pytest.raises(UntrustedError, match="owned by uid 65534"):
        write_files(theirs, {"uname.txt": "x"})
    assert list(theirs.iterdir()) == []
    shared = base / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(UntrustedError, match="writable by every user"):
        write_output(shared / "plan.json", "x")


@needs_root
def test_a_root_directory_inside_another_users_is_written_through_its_descriptor(base: Path) -> None:
    # node exporter's /var/lib/prometheus/node-exporter: root's, inside the prometheus user's own.
    service = base / "prometheus"
    (service / "node-exporter").mkdir(parents=True)
    os.chown(service, NOBODY, NOBODY)
    check_output_file(service / "node-exporter" / "verify.prom", "--prometheus")
    write_output(service / "node-exporter" / "verify.prom", "x 1\n")
    assert (service / "node-exporter" / "verify.prom").read_text() == "x 1\n"
    (service / "link").symlink_to(service / "node-exporter")
    os.lchown(service / "link", NOBODY, NOBODY)  # a link of theirs on the way is never followed
    with pytest.raises(UntrustedError, match="a symbolic link owned by uid 65534"):
        write_output(service / "link" / "verify.prom", "x 1\n")


@needs_root
def test_a_directory_created_in_a_sticky_one_must_be_ours_once_made(base: Path) -> None:
    sticky = base / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    check_output_directory(sticky / "raw", "--save-raw")  # would be created: allowed
    assert write_files(sticky / "raw", {"a.txt": "x"}, mode=PRIVATE) == [sticky / "raw" / "a.txt"]
    (sticky / "first").mkdir()
    os.chown(sticky / "first", NOBODY, NOBODY)  # another user made the name first
    with pytest.raises(UntrustedError, match="owned by uid 65534"):
        write_files(sticky / "first", {"a.txt": "x"})
    with pytest.raises(UntrustedError, match="writable by every user"):
        check_output_directory(sticky, "--save-raw")  # /tmp itself as the directory written into


@needs_root
def test_a_runs_directory_another_user_could_swap_is_refused(base: Path) -> None:
    theirs = base / "runs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(
        UntrustedError, match=r"the runs directory is not trusted: a directory owned by uid 65534"
    ):
        ansible.new_run_dir(theirs, "apply")
    assert list(theirs.iterdir()) == []
    made = ansible.new_run_dir(base / "new" / "runs", "apply")
    assert (made.stat().st_mode & 0o777) == 0o700


@needs_root
def test_ansible_is_not_started_on_a_run_directory_others_could_write(base: Path) -> None:
    run = base / "run"
    (run / "env").mkdir(parents=True)
    (run / "env" / "cmdline").write_text("--become-user eve")
    os.chown(run / "env" / "cmdline", NOBODY, NOBODY)
    with pytest.raises(UntrustedError, match=r"run directory's env is not trusted: .*cmdline"):
        ansible.check_run_inputs(run, "localhost ansible_connection=local")


@needs_root
@pytest.mark.parametrize("where", ["inventory", "group_vars", "host_vars", "inventory-directory"])
def test_an_inventory_or_its_vars_another_user_wrote_is_refused(base: Path, where: str) -> None:
    inventory = base / "inv" / "hosts.ini"
    inventory.parent.mkdir()
    inventory.write_text("[gpu]\nh1\n")
    if where == "inventory":
        os.chown(inventory, NOBODY, NOBODY)
    elif where == "inventory-directory":
        (base / "inv" / "more.ini").write_text("[cpu]\nh2 ansible_python_interpreter=/tmp/x\n")
        os.chown(base / "inv" / "more.ini", NOBODY, NOBODY)
        inventory = inventory.parent
    else:
        (base / "inv" / where).mkdir()
        (base / "inv" / where / "gpu.yml").write_text("ansible_python_interpreter: /tmp/evil\n")
        os.chown(base / "inv" / where / "gpu.yml", NOBODY, NOBODY)
    with pytest.raises(FactsError, match=r"not trusted: .*owned by uid 65534") as raised:
        check_inventory(inventory)
    assert "\n" not in str(raised.value)


def test_a_binary_inventory_is_one_line_before_ansible_reads_it(base: Path) -> None:
    inventory = base / "hosts"
    inventory.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    with pytest.raises(
        ProvisionError, match=r"hosts:1:\d+: not a text inventory file \((NUL byte|not UTF-8 text)\)"
    ):
        check_inventory(inventory)
