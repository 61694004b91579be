"""A Rocky-Linux-like apply target whose package manager is real dnf, and its repositories.

No Rocky Linux userland can be fetched here, so the golden root is Debian 12 (debootstrap
``--variant=minbase``) with Debian's real ``dnf`` 4.14, ``python3-dnf``, ``dnf-plugins-core``
(versionlock) and ``rpm`` 4.18, made to look like Rocky Linux to everything that asks:

- ``/etc/os-release`` is Rocky Linux 9.5's (``ID=rocky``, ``PLATFORM_ID=platform:el9``, which dnf
  reads for module platform filtering), ``/etc/rocky-release`` and its ``redhat-release`` /
  ``system-release`` links say ``Rocky Linux release 9.5 (Blue Onyx)``, and Debian's
  ``/etc/debian_version`` and ``/etc/lsb-release`` are moved aside: Ansible's distribution
  facts then give ``ansible_distribution=Rocky``, ``ansible_os_family=RedHat`` and, because
  ``/usr/bin/dnf`` exists, ``ansible_pkg_mgr=dnf`` (ansible-core
  ``module_utils/facts/system/pkg_mgr.py``: ``_check_rh_versions``).
- An initialised rpm database holding a stand-in ``rocky-release`` (Provides
  ``system-release(releasever) = 9``, as Rocky's does), so dnf finds ``$releasever`` itself.
- ``/etc/yum.repos.d`` is empty: the apply configures NVIDIA's repository (the stand-in, over
  the session's http server) and a stand-in EPEL for ``dkms``.
- ``/usr/sbin/policy-rc.d`` as in the Debian golden root, root's ssh key, sshd host keys.

What this root is not, and the tests do not pretend: the kernel is the host's (no Rocky
kernel, no ``kernel-devel`` of it, no dracut run that matters), the rpm scriptlets are empty,
and the rest of the userland is Debian's (``/bin/sh`` is dash, systemd is absent).

The root is cached at ``<cache>/golden-rockylike9`` with a recipe stamp like the Debian ones
(:mod:`tests.integration.harness.golden`); targets are overlays of it with their own sshd
(:func:`tests.integration.harness.target.start_target`).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from . import golden
from .dnfroot import OS_RELEASE
from .proc import HarnessError, file_lock, run
from .rhelrepo import (
    Major,
    RhelRepo,
    RpmKey,
    epel_rpms,
    index_repo,
    make_rpm_key,
    publish_epel,
    publish_rhel_repo,
)
from .rpms import Rpm, ensure_rpms
from .server import StaticServer

RECIPE_VERSION = "golden-rockylike9-4"
INCLUDE = (
    "python3",
    "openssh-server",
    "dnf",
    "python3-dnf",
    "dnf-plugins-core",
    "rpm",
    "ca-certificates",
    "gnupg",
)
CONTAINERS_INCLUDE = ("podman", "runc", "busybox-static")
"""For the containers tests' variant of the root (:func:`ensure_rockylike_root` ``containers``): a
real container engine, as on the Debian 13 root (harness/golden.py: runc, since crun refuses this
build machine's hybrid cgroup hierarchy; busybox-static for a container root filesystem). Podman
is the RHEL family's own engine; this one is Debian 12's podman 4.3.1, not Rocky's build."""
RPM_DBPATH = "var/lib/rpm"
ROCKY_RELEASE = "Rocky Linux release 9.5 (Blue Onyx)\n"
KERNEL = ("5.14.0", "503.14.1.el9_5")
"""Rocky Linux 9.5's kernel (``kernel-core-5.14.0-503.14.1.el9_5``), as a stand-in package."""
OS_REPOS = "var/lib/rocky-standin"
"""Where the root's stand-ins of Rocky's BaseOS and AppStream repositories live (``file://``)."""
DRACUT_LOG = "var/log/dracut-standin.log"
DRACUT = """#!/bin/sh
# Stand-in dracut: there is no Rocky kernel here, so no initramfs can be built. It records how it
# was called (the tests read the record) and succeeds, as dracut does with nothing to rebuild.
echo "dracut $*" >> /var/log/dracut-standin.log
exit 0
"""


EPEL_REPO = f"""[epel]
name=Extra Packages for Enterprise Linux 9 - x86_64 (stand-in)
baseurl=file:///{OS_REPOS}/epel
enabled=1
gpgcheck=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9
"""


def os_rpms(epel_key: str = "") -> dict[str, list[Rpm]]:
    """Stand-ins of Rocky packages the RHEL tasks touch, by repository (empty unless noted).

    BaseOS: ``kernel-core`` (installed in the root), ``dracut`` (installed; its one file is the
    recording script :data:`DRACUT`). AppStream: ``kernel-devel`` and ``kernel-headers`` of
    that kernel (Provides ``kernel-devel-uname-r``, as Rocky's does), what DKMS builds against,
    and ``python3-dnf-plugin-versionlock`` (empty: Debian's dnf-plugins-core is the plugin).
    Extras: ``epel-release``, whose files are EPEL's ``.repo`` (:data:`EPEL_REPO`, pointing at
    the stand-in EPEL in the root) and its key ``epel_key``, as Rocky's extras ship it
    (https://docs.fedoraproject.org/en-US/epel/getting-started/: ``dnf install epel-release``
    on Rocky). EPEL: ``dkms`` (signed by that key).
    """
    version, release = KERNEL
    uname = f"{version}-{release}.x86_64"
    epel_files = (
        ("/etc/yum.repos.d/epel.repo", 0o644, EPEL_REPO),
        ("/etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9", 0o644, epel_key),
    )
    return {
        "extras": [Rpm("epel-release", "9", "8.el9", arch="noarch", files=epel_files)],
        "baseos": [
            Rpm(
                "kernel-core",
                version,
                release,
                provides=(f"kernel-uname-r = {uname}",),
                summary="Stand-in kernel",
            ),
            Rpm("dracut", "057", "70.git20240819.el9", files=(("/usr/bin/dracut", 0o755, DRACUT),)),
        ],
        "appstream": [
            Rpm("kernel-devel", version, release, provides=(f"kernel-devel-uname-r = {uname}",)),
            Rpm("kernel-headers", version, release),
            # The plugin itself is Debian's dnf-plugins-core, already in the root; this empty
            # package is the name the RedHat tasks install, as Rocky's AppStream carries it.
            Rpm("python3-dnf-plugin-versionlock", "4.3.0", "16.el9", arch="noarch"),
        ],
    }


RELEASE_RPM = Rpm(
    "rocky-release",
    "9.5",
    "1.2.el9",
    arch="noarch",
    provides=("system-release", "system-release(releasever) = 9", "redhat-release = 9.5"),
    summary="Stand-in for Rocky Linux's rocky-release (empty payload, test data only)",
)


def ensure_rockylike_root(cache: Path | None = None, *, containers: bool = False) -> golden.GoldenRoot:
    """The cached Rocky-like root, built first when missing or stale (~70 s + download).

    Args:
        containers: The variant with :data:`CONTAINERS_INCLUDE` (its own cached root,
            ``golden-rockylike9-containers``, so the plain root stays as it is).

    Raises:
        HarnessError: when debootstrap or a customisation step fails.
    """
    cache = cache or golden.cache_dir()
    root = cache / ("golden-rockylike9-containers" if containers else "golden-rockylike9")
    recipe = f"{RECIPE_VERSION}+containers" if containers else RECIPE_VERSION
    key = golden.ensure_ssh_key(cache)
    with file_lock(cache / "golden.lock"):
        stamp = root / golden.STAMP
        if stamp.exists() and stamp.read_text().strip() == recipe:
            return golden.GoldenRoot(root, key, 0.0)
        started = time.monotonic()
        tmp = root.with_name(f"{root.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(INCLUDE)}",
                    "bookworm",
                    tmp,
                    golden.MIRROR,
                ]
            )
            if containers:
                _install_debs(tmp, CONTAINERS_INCLUDE)
            _customise(tmp, key, cache, recipe)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if root.exists():
            shutil.rmtree(root)
        tmp.rename(root)
        return golden.GoldenRoot(root, key, time.monotonic() - started)


def _install_debs(root: Path, names: tuple[str, ...]) -> None:
    """Install Debian packages into the fresh root with its own apt (before its apt source is moved
    aside): debootstrap's own ordering fails to configure podman's containers-common in minbase,
    apt's does not."""
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    env = ["env", "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C"]
    run(["chroot", root, *env, "apt-get", "-q", "-y", "--no-install-recommends", "install", *names])
    run(["chroot", root, "apt-get", "clean"])


def _customise(root: Path, key: Path, cache: Path, recipe: str = RECIPE_VERSION) -> None:
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\n# provision tests: never start services inside the chroot.\nexit 101\n")
    policy.chmod(0o755)
    etc = root / "etc"
    for debian_only in ("apt/sources.list", "debian_version", "lsb-release"):
        if (etc / debian_only).exists():
            (etc / debian_only).rename(etc / f"{debian_only}.debian")
    (etc / "os-release").unlink(missing_ok=True)  # a link to ../usr/lib/os-release on Debian
    (etc / "os-release").write_text(OS_RELEASE[9])
    (etc / "rocky-release").write_text(ROCKY_RELEASE)
    for link in ("redhat-release", "system-release"):
        (etc / link).unlink(missing_ok=True)
        (etc / link).symlink_to("rocky-release")
    _dnf_config(etc)
    ssh_dir = root / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(key.with_name("id_ed25519.pub").read_text())
    (ssh_dir / "authorized_keys").chmod(0o600)
    (root / "run/sshd").mkdir(parents=True, exist_ok=True)
    if not list((etc / "ssh").glob("ssh_host_*_key")):
        run(["chroot", root, "ssh-keygen", "-A"])
    # Debian's rpm keeps its database in ~/.rpmdb (it is not Debian's package manager); a Rocky
    # host keeps it in /var/lib/rpm, and so does this root.
    (etc / "rpm").mkdir(exist_ok=True)
    (etc / "rpm/macros.dbpath").write_text(f"%_dbpath /{RPM_DBPATH}\n")
    release_rpm = ensure_rpms([RELEASE_RPM], cache) / RELEASE_RPM.filename
    shutil.copy2(release_rpm, root / "tmp" / RELEASE_RPM.filename)
    run(["chroot", root, "rpm", "--initdb"])
    run(["chroot", root, "rpm", "-i", "--nodeps", f"/tmp/{RELEASE_RPM.filename}"])
    (root / "tmp" / RELEASE_RPM.filename).unlink()
    _os_repositories(root, cache)
    probe = run(
        ["chroot", root, "/usr/bin/python3", "-c", "import dnf, rpm; print(dnf.VERSION)"], check=False
    )
    if probe.returncode != 0:
        raise HarnessError(f"rocky-like root lacks python3-dnf for ansible.builtin.dnf: {probe.stderr}")
    (root / golden.STAMP).write_text(recipe + "\n")


ROCKY_DNF_CONF = (
    "[main]\ngpgcheck=1\ninstallonly_limit=3\nclean_requirements_on_remove=True\nbest=True\n"
    "skip_if_unavailable=False\n"
)
"""Rocky Linux 9's ``/etc/dnf/dnf.conf`` (Debian's differs: ``best=False``, ``skip_if_unavailable=True``)."""


def _dnf_config(etc: Path) -> None:
    """Rocky's dnf.conf, an empty ``/etc/yum.repos.d`` (Debian's dnf package has none), and
    Debian's ``local`` plugin off (Rocky has none)."""
    (etc / "dnf/dnf.conf").write_text(ROCKY_DNF_CONF)
    (etc / "yum.repos.d").mkdir(mode=0o755, exist_ok=True)
    for repo in (etc / "yum.repos.d").glob("*.repo"):
        repo.unlink()
    local = etc / "dnf/plugins/local.conf"
    if local.exists():
        local.write_text(local.read_text().replace("enabled = true", "enabled = false", 1))


def _os_repositories(root: Path, cache: Path) -> None:
    """Rocky's own repositories (BaseOS, AppStream, Extras) as signed stand-ins inside the root,
    with their key imported (``RPM-GPG-KEY-Rocky-9``), ``kernel-core`` and ``dracut`` installed
    from them, and EPEL's stand-in beside them, reachable once ``epel-release`` is installed."""
    key = make_rpm_key(
        root / "tmp/rocky-key", "Rocky Enterprise Software Foundation stand-in <x@example.invalid>"
    )
    pki = root / "etc/pki/rpm-gpg"
    pki.mkdir(parents=True, exist_ok=True)
    shutil.copy2(key.armored, pki / "RPM-GPG-KEY-Rocky-9")
    run(["chroot", root, "rpm", "--import", "/etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9"])
    epel_key = make_rpm_key(root / "tmp/epel-key", "Fedora EPEL (9) stand-in <epel@example.invalid>")
    for name, rpms in os_rpms(epel_key.armored.read_text()).items():
        where = root / OS_REPOS / name
        index_repo(ensure_rpms(rpms, cache), rpms, where, None, key)
        (root / f"etc/yum.repos.d/rocky-{name}.repo").write_text(
            f"[{name}]\nname=Rocky Linux 9 - {name} (stand-in)\nbaseurl=file:///{OS_REPOS}/{name}\n"
            "enabled=1\ngpgcheck=1\ngpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9\n"
        )
    epel = epel_rpms(9)
    index_repo(ensure_rpms(epel, cache), epel, root / OS_REPOS / "epel", None, epel_key)
    run(["chroot", root, "dnf", "-y", "-q", "install", "kernel-core", "dracut"])
    shutil.rmtree(root / "tmp/rocky-key")
    shutil.rmtree(root / "tmp/epel-key")


@dataclass(frozen=True)
class RhelRepos:
    """The stand-in repositories, served over http like NVIDIA's and EPEL's.

    Attributes:
        nvidia: ``rhel9`` at ``<url>/compute/cuda/repos/rhel9/x86_64/`` (NVIDIA's layout).
        nvidia10: ``rhel10`` at ``.../repos/rhel10/x86_64/``.
        epel: EPEL 9's stand-in (``dkms``) at ``<url>/epel/9/Everything/x86_64/``.
        base_url: Replaces ``https://developer.download.nvidia.com/compute/cuda``.
        key: The signing key; its armored public half is served beside each NVIDIA repository.
        key_url: That key over http, like NVIDIA's ``.../rhel9/x86_64/D42D0685.pub``.
        epel_url: EPEL's stand-in over http.
    """

    nvidia: RhelRepo
    nvidia10: RhelRepo
    epel: RhelRepo
    base_url: str
    key: RpmKey
    key_url: str
    epel_url: str

    def url(self, major: Major) -> str:
        """The http URL of NVIDIA's stand-in ``rhel<major>`` repository."""
        return f"{self.base_url}/repos/rhel{major}/x86_64/"


def publish_rhel_repos(server: StaticServer, cache: Path, scratch: Path) -> RhelRepos:
    """Build (or reuse) the RPMs and publish rhel9, rhel10 and EPEL 9 under ``server.root``."""
    key = make_rpm_key(scratch / "rpm-key")
    www = server.root
    repos = {m: publish_rhel_repo(m, cache, www / f"compute/cuda/repos/rhel{m}/x86_64", key) for m in (9, 10)}
    epel = publish_epel(9, cache, www / "epel/9/Everything/x86_64")
    for repo in repos.values():
        shutil.copy2(key.armored, repo.path / key.armored.name)
    base = f"{server.url}/compute/cuda"
    key_url = f"{base}/repos/rhel9/x86_64/{key.armored.name}"
    return RhelRepos(repos[9], repos[10], epel, base, key, key_url, f"{server.url}/epel/9/Everything/x86_64/")


def rpm_installed(root: Path) -> dict[str, str]:
    """Installed packages in a target: name -> ``epoch:version-release``, read by the host's rpm
    on the target's database (so it works when the target's own tools are broken)."""
    from provision.os.redhat.parse import RPM_QA_QUERYFORMAT, parse_rpm_qa

    argv = ["rpm", f"--root={root}", f"--dbpath=/{RPM_DBPATH}", "-qa", "--qf", RPM_QA_QUERYFORMAT]
    out = run(argv).stdout
    return {p.name: f"{p.epoch}:{p.version}-{p.release}" for p in parse_rpm_qa(out)}


def _capture(dest: Path) -> None:
    """Write what ``ansible.builtin.dnf`` returns for each dnf failure class, as JSON fixtures."""
    import json
    import tempfile

    from . import runner
    from .rhelrepo import make_rpm_key
    from .server import start_server
    from .target import start_target

    base = Path(tempfile.mkdtemp(prefix="rocky-capture-"))
    (base / "www").mkdir()
    server = start_server(base / "www", base / "http.log")
    repos = publish_rhel_repos(server, golden.cache_dir(), base / "scratch")
    other = make_rpm_key(base / "other", "Someone else <x@example.invalid>")
    shutil.copy2(other.armored, repos.nvidia.path / other.armored.name)
    root = ensure_rockylike_root()
    enable = ["dnf", "-y", "module", "enable", "nvidia-driver:580-open"]

    def case(name: str, args: str, setup: tuple[list[str], ...] = (), **opts: object) -> None:
        target = start_target(root.path, root.ssh_key, base / name)
        try:
            url = str(opts.get("url", repos.url(9)))
            key = str(opts.get("key", repos.key_url))
            text = f"[{repos.nvidia.repo_id}]\nname=cuda\nbaseurl={url}\nenabled=1\n"
            text += f"gpgcheck=1\ngpgkey={key}\n"
            if opts.get("epel", True):
                text += f"[epel]\nname=epel\nbaseurl={repos.epel_url}\nenabled=1\ngpgcheck=0\n"
            (target.root / "etc/yum.repos.d/cuda.repo").write_text(text)
            if opts.get("el10"):
                release = target.root / "etc/os-release"
                release.write_text(OS_RELEASE[10])
            for argv in setup:
                target.run(argv, check=True)
            result = runner.run_module(target.inventory, "ansible.builtin.dnf", args, target.workdir)
            (res,) = runner.task_results(result).values()
            kept = {k: res[k] for k in ("msg", "failures", "results", "rc") if k in res}
            text_out = json.dumps(kept, indent=2).replace(server.url, "http://127.0.0.1:8080")
            (dest / f"ansible-dnf-{name}.json").write_text(text_out + "\n")
            print(f"{name}: {result.status}")
        finally:
            target.close()

    try:
        case("filtered-other-stream", "name=nvidia-driver-3:590.48.01", (enable,))
        case("no-match", "name=nvidia-driver-9999")
        case("nothing-provides", "name=nvidia-open", (enable,), epel=False)
        case("module-other-stream", "name=@nvidia-driver:590-open/default", (enable,))
        lock = ["dnf", "-y", "versionlock", "add", "nvidia-*-3:580.82.07*", "kmod-nvidia-*-3:580.82.07*"]
        case(
            "versionlock-excluded",
            "name=nvidia-open-3:580.95.05",
            (enable, ["dnf", "-y", "install", "nvidia-open-3:580.82.07"], lock),
        )
        case("gpg-wrong-key", "name=nvidia-persistenced", key=f"{repos.url(9)}{other.armored.name}")
        case("gpg-key-unreachable", "name=nvidia-persistenced", key=f"{repos.url(9)}missing.pub")
        case("repo-down", "name=nvidia-persistenced", url=f"{repos.base_url}/repos/rhel8/x86_64/")
        case("other-major", "name=nvidia-open", el10=True)
        case("module-other-major", "name=@nvidia-driver:580-open/default", el10=True)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["capture"] and len(sys.argv) == 3:
        _capture(Path(sys.argv[2]))
    else:
        sys.exit("usage: python3 -m tests.integration.harness.rockylike capture DIR")
