"""The golden roots: debootstrapped Debian 12 and Debian 13 "fresh boxes", each built once and cached.

Every integration target is a copy-on-write overlay of this tree, so it must never be written
to after the build. What it contains, and why:

- ``debootstrap --variant=minbase bookworm`` (measured on a 2-core Debian 12 machine: 23 s,
  206 MB) plus the packages the Ansible modules our playbooks use need *inside the target*:

  ===========================  =================================================
  Ansible module               needs in the target
  ===========================  =================================================
  any module                   ``python3`` (ansible_python_interpreter)
  ``ansible.builtin.apt``      ``python3-apt`` (else it tries to install it itself)
  ``deb822_repository``        ``python3-debian`` (the module's "Requirements", see below)
  ``dpkg_selections``          ``dpkg`` (essential, always there)
  ``pip`` with a venv          ``python3-venv`` (brings ensurepip's pip wheel)
  ``get_url`` / ``copy``       nothing beyond python3; https needs ``ca-certificates``
  ``command``                  nothing
  key import / dearmor         ``gnupg``
  ssh connection               ``openssh-server``
  ===========================  =================================================

  deb822_repository's requirements:
  https://docs.ansible.com/ansible/latest/collections/ansible/builtin/deb822_repository_module.html

- ``/usr/sbin/policy-rc.d`` exiting 101, so no package starts a service in a chroot.
- Debian's own apt source is moved aside (``/etc/apt/sources.list.debian``): a target only
  sees the repositories a test configures, which keeps ``apt-get update`` hermetic and fast.
- ``/root/.ssh/authorized_keys`` holding the cached test key (see :func:`ensure_ssh_key`), and
  sshd host keys (openssh-server's postinst makes them; we check and fill in if absent).

The Debian 13 (trixie) root (:data:`TRIXIE`) also holds the distribution's real container runtime
for the containers tests: ``podman`` (5.4.2 in trixie) with ``runc`` (crun refuses this build
machine's hybrid cgroup hierarchy: "cgroups in hybrid mode not supported") and
``busybox-static``, whose one static binary makes a container root filesystem with no image.

The build goes into a temporary sibling directory and is renamed into place, so a crashed
build never leaves a half-made root behind; a stamp file records :data:`RECIPE_VERSION`, and a
root with another stamp is rebuilt.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .proc import HarnessError, file_lock, run

#: Bump whenever the recipe below changes; a cached root with another value is rebuilt.
RECIPE_VERSION = "golden-bookworm-3"
SUITE = "bookworm"
TRIXIE = "trixie"
RECIPES = {SUITE: RECIPE_VERSION, TRIXIE: "golden-trixie-1"}
"""Each suite's recipe version."""
EXTRA_INCLUDE = {SUITE: (), TRIXIE: ("podman", "runc", "busybox-static")}
MIRROR = os.environ.get("PROVISION_TEST_MIRROR", "http://deb.debian.org/debian")
INCLUDE = (
    "python3",
    "python3-venv",
    "python3-apt",
    "python3-debian",
    "openssh-server",
    "ca-certificates",
    "gnupg",
)
DEFAULT_CACHE = Path("/var/cache/provision-tests")
STAMP = ".provision-golden-stamp"


@dataclass(frozen=True)
class GoldenRoot:
    """A built golden root.

    Attributes:
        path: The root filesystem (read-only by convention; overlay it, never write to it).
        ssh_key: Private ed25519 key whose public half is root's authorized key in the root.
        build_seconds: Wall time of the debootstrap build, or 0.0 when the cache was reused.
    """

    path: Path
    ssh_key: Path
    build_seconds: float


def cache_dir() -> Path:
    """The cache directory: ``$PROVISION_TEST_CACHE`` or ``/var/cache/provision-tests``."""
    return Path(os.environ.get("PROVISION_TEST_CACHE", DEFAULT_CACHE))


def ensure_ssh_key(cache: Path) -> Path:
    """Create the test keypair ``<cache>/ssh/id_ed25519`` once and return the private key path."""
    key = cache / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = key.with_name(f"id_ed25519.{os.getpid()}")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "provision-tests", "-f", tmp])
        tmp.with_name(tmp.name + ".pub").rename(key.with_name("id_ed25519.pub"))
        tmp.rename(key)
    return key


def ensure_golden_root(cache: Path | None = None, suite: str = SUITE) -> GoldenRoot:
    """Return the cached golden root of ``suite`` (bookworm or trixie), building it first when
    missing or stale.

    Concurrent sessions serialise on a lock file, so the root is built once.

    Raises:
        HarnessError: when debootstrap or a customisation step fails.
    """
    cache = cache or cache_dir()
    root = cache / f"golden-{suite}"
    key = ensure_ssh_key(cache)
    with file_lock(cache / "golden.lock"):
        if _stamp(root) == RECIPES[suite]:
            return GoldenRoot(root, key, 0.0)
        started = time.monotonic()
        _build(root, key, suite)
        return GoldenRoot(root, key, time.monotonic() - started)


def _stamp(root: Path) -> str | None:
    stamp = root / STAMP
    return stamp.read_text().strip() if stamp.exists() else None


def _build(root: Path, key: Path, suite: str) -> None:
    tmp = root.with_name(f"{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    include = ",".join((*INCLUDE, *EXTRA_INCLUDE[suite]))
    try:
        run(["debootstrap", "--variant=minbase", f"--include={include}", suite, tmp, MIRROR])
        _customise(tmp, key, RECIPES[suite])
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    stale = root.with_name(f"{root.name}.old-{os.getpid()}")
    if root.exists():
        root.rename(stale)
    tmp.rename(root)
    shutil.rmtree(stale, ignore_errors=True)


def _customise(root: Path, key: Path, recipe: str) -> None:
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\n# provision tests: never start services inside the chroot.\nexit 101\n")
    policy.chmod(0o755)
    sources = root / "etc/apt/sources.list"
    if sources.exists():
        sources.rename(root / "etc/apt/sources.list.debian")
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    authorized = ssh_dir / "authorized_keys"
    authorized.write_text(key.with_name("id_ed25519.pub").read_text())
    authorized.chmod(0o600)
    (root / "run/sshd").mkdir(parents=True, exist_ok=True)
    if not list((root / "etc/ssh").glob("ssh_host_*_key")):
        run(["chroot", root, "ssh-keygen", "-A"])
    _check_modules_importable(root)
    (root / STAMP).write_text(recipe + "\n")


def _check_modules_importable(root: Path) -> None:
    """Fail the build early if a Python module an Ansible module needs is missing."""
    probe = "import apt, apt_pkg, debian.deb822, venv, ensurepip"
    proc = run(["chroot", root, "/usr/bin/python3", "-c", probe], check=False)
    if proc.returncode != 0:
        raise HarnessError(f"golden root lacks Python modules Ansible needs: {proc.stderr}")


def _main() -> None:
    """``python3 -m tests.integration.harness.golden``: build (or reuse) both roots, print figures."""
    for suite in RECIPES:
        root = ensure_golden_root(suite=suite)
        size = run(["du", "-sm", root.path]).stdout.split()[0]
        state = f"built in {root.build_seconds:.1f} s" if root.build_seconds else "reused from cache"
        print(f"golden root {root.path} ({RECIPES[suite]}): {state}, {size} MB")


if __name__ == "__main__":
    _main()
