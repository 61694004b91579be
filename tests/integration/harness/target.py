"""A per-test target machine: an overlay of the golden root with its own sshd on loopback.

Mounts (undone in reverse by :meth:`Target.close`, lazily if a busy mount resists)::

    overlay  ROOT           lowerdir=golden, upperdir/workdir under the test's tmp dir
    proc     ROOT/proc
    sysfs    ROOT/sys
    rbind    ROOT/dev       then --make-rslave, so unmounting it never reaches the host's /dev

The target's own ``/usr/sbin/sshd`` runs chrooted on ``127.0.0.N:2222``; every address in
127.0.0.0/8 reaches ``lo`` on Linux, so no alias needs adding. N is unique per live target
across all processes on the machine (an ``flock`` per address under /run), so concurrent pytest
sessions do not collide.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .proc import Argv, HarnessError, run
from .server import wait_for_port

SSH_PORT = 2222
BOOT_ID = "var/lib/harness/boot_id"
"""The target's boot id (a chroot shares the host's ``/proc/sys/kernel/random/boot_id``)."""
REBOOT_REQUEST = "harness-reboot-request"
"""The file under the target's ``/run`` whose appearance asks the harness for a reboot."""
LOCK_DIR = Path("/run/provision-tests")
CHROOT_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
}


@dataclass
class Target:
    """A running target.

    Attributes:
        root: The target's root filesystem (the overlay mount point).
        host: Its loopback address, ``127.0.0.N``.
        port: Its sshd port.
        ssh_key: Private key accepted for root.
        inventory: Ansible INI inventory with one host, ``target``.
        workdir: Scratch directory of this target (upper/work dirs, logs).
    """

    root: Path
    host: str
    port: int
    ssh_key: Path
    inventory: Path
    workdir: Path
    _sshd: subprocess.Popen[bytes] | None = None
    _mounts: list[Path] = field(default_factory=list)
    _address_lock: IO[str] | None = None

    def run(
        self, argv: Argv, *, check: bool = False, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the target's chroot with a clean environment.

        Never raises for a non-zero exit unless ``check`` is true.
        """
        return run(["chroot", self.root, *argv], check=check, env=CHROOT_ENV, input_text=input_text)

    def use_debian_archive(
        self, cache: Path, suite: str, components: str, mirror: str, security: str
    ) -> None:
        """Give the target Debian's own archive, as a Debian machine has it: a deb822 source for
        ``suite``, ``suite-updates`` and ``suite-security`` with ``components`` (``main contrib
        non-free non-free-firmware``), signed by the archive keyring debootstrap installed. The
        target's ``/var/cache/apt/archives`` is bind-mounted from ``cache`` (kept between runs, so
        each .deb is downloaded once; apt keeps what it downloads). Then ``apt-get update``.

        Raises:
            HarnessError: when the mount or ``apt-get update`` fails.
        """
        (cache / "partial").mkdir(parents=True, exist_ok=True)
        archives = self.root / "var/cache/apt/archives"
        run(["mount", "--bind", cache, archives])
        self._mounts.append(archives)
        keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
        (self.root / "etc/apt/sources.list.d/debian.sources").write_text(
            f"Types: deb\nURIs: {mirror}\nSuites: {suite} {suite}-updates\nComponents: {components}\n"
            f"Signed-By: {keyring}\n\n"
            f"Types: deb\nURIs: {security}\nSuites: {suite}-security\nComponents: {components}\n"
            f"Signed-By: {keyring}\n"
        )
        self.run(["apt-get", "update", "-q", "--error-on=any"], check=True)

    def bind_cgroups(self) -> None:
        """Give the target the host's cgroup hierarchy, where a container runtime (runc) makes its
        containers' cgroups; unmounted with the rest by :meth:`close`.

        Raises:
            HarnessError: when the mount fails.
        """
        where = self.root / "sys/fs/cgroup"
        run(["mount", "--rbind", "/sys/fs/cgroup", where])
        self._mounts.append(where)
        run(["mount", "--make-rslave", where])

    def dpkg_status(self) -> dict[str, tuple[str, str]]:
        """Every package dpkg knows in the target: name -> (version, status), e.g.
        ``("580.95.05-1", "hold ok installed")``. Read with the host's dpkg-query on the
        target's database, so it works even when the target's tools are broken."""
        out = run(
            [
                "dpkg-query",
                f"--admindir={self.root}/var/lib/dpkg",
                "-W",
                "-f",
                "${Package}\t${Version}\t${Status}\n",
            ]
        ).stdout
        return {
            name: (version, status)
            for name, version, status in (line.split("\t") for line in out.splitlines() if line)
        }

    def installed(self) -> dict[str, str]:
        """Installed (or held) packages only: name -> version."""
        return {n: v for n, (v, s) in self.dpkg_status().items() if s.endswith(" installed")}

    def ssh(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """Run a command in the target over ssh, as Ansible would reach it."""
        return run(["ssh", *ssh_options(self.ssh_key, self.port), f"root@{self.host}", *argv], check=False)

    def reboot(self) -> None:
        """What a reboot does to the target, as far as a chroot allows: sshd and every process in it
        stop (open ssh sessions drop), ``/run``'s flags are gone (a tmpfs after a real boot), the boot id
        (:data:`BOOT_ID`, the ``boot_time_command`` the reboot play reads) changes, and sshd starts again.
        The kernel, and so any module the apply installed, stays the host's.
        """
        if self._sshd is not None:
            _stop(self._sshd)
            self._sshd = None
        _kill_chrooted(self.root)
        for name in ("reboot-required", "reboot-required.pkgs", REBOOT_REQUEST):
            (self.root / "run" / name).unlink(missing_ok=True)
        boot_id = self.root / BOOT_ID
        boot_id.parent.mkdir(parents=True, exist_ok=True)
        boot_id.write_text(f"{uuid.uuid4()}\n")
        self._sshd = _start_sshd(self)

    def close(self) -> None:
        """Stop sshd and every process left in the chroot, then unmount everything."""
        if self._sshd is not None:
            _stop(self._sshd)
            self._sshd = None
        _kill_chrooted(self.root)
        for mount in reversed(self._mounts):
            _unmount(mount)
        self._mounts.clear()
        if self._address_lock is not None:
            self._address_lock.close()
            self._address_lock = None


def ssh_options(key: Path, port: int) -> list[str]:
    """ssh client options for a target: key auth only, no host-key bookkeeping."""
    return [
        "-i",
        str(key),
        "-p",
        str(port),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "LogLevel=ERROR",
    ]


def start_target(golden: Path, ssh_key: Path, workdir: Path) -> Target:
    """Mount a fresh overlay of ``golden`` under ``workdir`` and start its sshd.

    Raises:
        HarnessError: when a mount fails or sshd does not listen within 10 s; whatever was
            already set up is torn down first.
    """
    root = workdir / "root"
    for sub in ("root", "upper", "work"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    host, lock = _claim_address()
    target = Target(root, host, SSH_PORT, ssh_key, workdir / "inventory.ini", workdir, _address_lock=lock)
    try:
        _mount_all(target, golden)
        _write_inventory(target)
        target._sshd = _start_sshd(target)
    except BaseException:
        target.close()
        raise
    return target


def _mount_all(target: Target, golden: Path) -> None:
    root, work = target.root, target.workdir
    options = f"lowerdir={golden},upperdir={work / 'upper'},workdir={work / 'work'}"
    run(["mount", "-t", "overlay", "overlay", "-o", options, root])
    target._mounts.append(root)
    run(["mount", "-t", "proc", "proc", root / "proc"])
    target._mounts.append(root / "proc")
    run(["mount", "-t", "sysfs", "sysfs", root / "sys"])
    target._mounts.append(root / "sys")
    run(["mount", "--rbind", "/dev", root / "dev"])
    target._mounts.append(root / "dev")
    run(["mount", "--make-rslave", root / "dev"])


def _write_inventory(target: Target) -> None:
    target.inventory.write_text(
        "[all]\n"
        f"target ansible_host={target.host} ansible_port={target.port} ansible_user=root "
        f"ansible_ssh_private_key_file={target.ssh_key} ansible_python_interpreter=/usr/bin/python3 "
        "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n"
    )


def _start_sshd(target: Target) -> subprocess.Popen[bytes]:
    (target.root / "run/sshd").mkdir(parents=True, exist_ok=True)
    log = (target.workdir / "sshd.log").open("ab")
    argv = [
        "chroot",
        str(target.root),
        "/usr/sbin/sshd",
        "-D",
        "-e",
        "-p",
        str(target.port),
        "-o",
        f"ListenAddress={target.host}",
        "-o",
        "PasswordAuthentication=no",
        "-o",
        "UseDNS=no",
    ]
    with log:
        sshd = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=CHROOT_ENV)
    if not wait_for_port(target.host, target.port, 10.0, sshd):
        _stop(sshd)
        raise HarnessError(
            f"sshd of {target.root} did not listen on {target.host}:{target.port}: "
            f"{(target.workdir / 'sshd.log').read_text()[-2000:]}"
        )
    return sshd


def _claim_address() -> tuple[str, IO[str]]:
    """Lock and return a free ``127.0.0.N`` (N in 2..254) for this process's target."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    for n in range(2, 255):
        handle = (LOCK_DIR / f"addr-{n}.lock").open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return f"127.0.0.{n}", handle
    raise HarnessError("no free loopback address 127.0.0.2-254 for a target")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _kill_chrooted(root: Path) -> None:
    """Kill, by pid, the processes whose root directory is ``root`` (ssh sessions, agents)."""
    for _ in range(50):
        pids = _pids_rooted_at(root)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _pids_rooted_at(root: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "root") == str(root):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _unmount(mount: Path) -> None:
    """Unmount ``mount`` and everything below it; fall back to a lazy detach if busy."""
    if run(["umount", "-R", mount], check=False).returncode != 0:
        run(["umount", "-R", "-l", mount], check=False)
