"""The software part of an imported spec: driver, CUDA toolkit with cuDNN and NCCL, and the venv.

Each value comes from a fact, through the same package naming the components plan with (the
catalog's ``packages.yaml``) and the OS's package manager (``provision.os``); where the facts
point at a value without proving the plan takes it (the driver's source, the holds, an optional
version), the section offers the options in the evidence's order and
:func:`provision.importing.settle.settle` asks the planner.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from provision.catalog import Catalog
from provision.catalog.models import Architecture, GpuModel
from provision.detect.facts import (
    CudaToolkits,
    Facts,
    LoadedDriver,
    NoVenv,
    Package,
    Torch,
    Unknown,
    Venv,
)
from provision.importing.draft import DROP, Draft, Option
from provision.os.base import PackageManager, numeric_upstream
from provision.spec.paths import absolute_path, venv_path
from provision.unknown import because
from provision.versions import DottedVersion, DriverVersion

_VARIANT = re.compile(r"^cu\d{3}$")


def _pm(facts: Facts, distro: str) -> PackageManager:
    return facts.package_manager(distro)


def driver_section(draft: Draft, facts: Facts, catalog: Catalog, gpu: GpuModel, distro: str) -> None:
    """``driver:``: branch, version and flavour of the loaded (else installed) driver; its source and
    the holds as choices."""
    pm = _pm(facts, distro)
    version, seen = _driver_version(facts, pm)
    if version is None:
        branch = _default_branch(catalog, gpu.architecture)
        draft.put(
            "driver.branch",
            branch,
            f"no NVIDIA driver loaded or installed ({seen}): {branch} is "
            f"the catalog's newest long-term support branch (LTSB) for {gpu.architecture}; plan installs it",
        )
        draft.put("driver.flavor", "auto", "auto: open kernel modules for Turing and newer")
        draft.put("driver.source", "nvidia-repo")
        return
    draft.put("driver.branch", version.branch)
    draft.put("driver.flavor", *_flavor(facts, catalog, version.branch))
    draft.put(
        "driver.version",
        version.text,
        f"{seen}; leave driver.version out to follow branch {version.branch}'s newest release",
    )
    draft.choose(
        "driver.version",
        Option({}, ""),
        Option({"driver.version": DROP}, f"branch {version.branch} as provision's apt pins name it"),
    )
    draft.choose("driver.source", *_sources(facts, catalog, pm, version.branch))
    draft.choose("driver.hold", *_holds(facts, catalog), late=True)


def _driver_version(facts: Facts, pm: PackageManager) -> tuple[DriverVersion | None, str]:
    """The loaded module's version, else the installed user-space driver's; and where it was read
    (or why not)."""
    if isinstance(facts.driver, LoadedDriver):
        return (
            facts.driver.version,
            f"the loaded driver ({facts.driver.flavor} kernel modules, /proc/driver/nvidia/version)",
        )
    userspace = facts.userspace_driver(pm.upstream)
    if userspace is not None:
        try:
            return DriverVersion(
                userspace.text
            ), f"the installed user-space driver (no module loaded: {facts.driver.unknown})"
        except ValueError:
            pass
    return None, facts.driver.unknown


def _default_branch(catalog: Catalog, arch: Architecture) -> int:
    """The newest LTSB branch not listed as ended that runs ``arch`` (DC-DRV, DIG; the branch's
    architectures from the catalog's first and last branch per architecture)."""
    fits = [
        b.branch
        for b in catalog.driver_branches.values()
        if b.type == "LTSB" and b.eol != "ended" and arch in catalog.branch_architectures(b.branch)
    ]
    last = catalog.last_branch_for(arch)
    return max(fits, default=last.branch if last is not None else max(catalog.driver_branches))


def _flavor(facts: Facts, catalog: Catalog, branch: int) -> tuple[str, str]:
    """The kernel module flavour and why: the loaded module's, else the installed driver meta's."""
    if isinstance(facts.driver, LoadedDriver):
        return facts.driver.flavor, f"the loaded module is the {facts.driver.flavor} one"
    for flavor in ("open", "proprietary"):
        meta = catalog.naming(facts.package_manager().package_format).driver_meta(branch, flavor)
        if _installed(facts, meta) is not None:
            return flavor, f"{meta} is installed"
    return (
        "auto",
        "flavour not observed (no module loaded, no driver meta installed): auto picks open for "
        "Turing and newer",
    )


def _installed(facts: Facts, name: str) -> Package | None:
    found = facts.package(name)
    return found if found is not None and found.installed else None


def _sources(facts: Facts, catalog: Catalog, pm: PackageManager, branch: int) -> tuple[Option, ...]:
    """``driver.source`` options, the evidence's first: NVIDIA's meta installed -> nvidia-repo; other
    driver packages -> distro; none -> preinstalled (what came with the image or a .run installer)."""
    metas = [
        m
        for f in ("open", "proprietary")
        if _installed(facts, m := catalog.naming(pm.package_format).driver_meta(branch, f))
    ]
    packages = facts.driver_packages(pm.upstream)
    repo = Option(
        {"driver.source": "nvidia-repo"},
        f"{', '.join(metas)} from NVIDIA's repository is installed" if metas else "NVIDIA's repository",
    )
    distro = Option(
        {"driver.source": "distro"}, f"the driver packages ({', '.join(packages)}) are the distribution's"
    )
    image = Option(
        {"driver.source": "preinstalled"},
        "no NVIDIA driver package is installed: the loaded driver "
        "came with the image or an installer; provision checks it and never installs one",
    )
    if metas:
        return repo, distro, image
    return (distro, repo, image) if packages else (image, repo, distro)


def _holds(facts: Facts, catalog: Catalog) -> tuple[Option, ...]:
    """``driver.hold`` options: true first when a package of the stack is held."""
    held = Option({"driver.hold": True}, "the NVIDIA stack is held and unattended-upgrades kept away from it")
    free = Option({"driver.hold": False}, "the NVIDIA packages are left as they are (not held by provision)")
    packages = () if isinstance(facts.packages, Unknown) else facts.packages
    return (held, free) if any(p.held and p.installed for p in packages) else (free, held)


def cuda_section(draft: Draft, facts: Facts, catalog: Catalog, distro: str) -> None:
    """``cuda:``: the default toolkit, and the cuDNN and NCCL installed for its CUDA major."""
    toolkits = facts.cuda
    release, seen = _toolkit(toolkits)
    if release is None:
        draft.note("cuda", f"no CUDA toolkit found ({seen}): cuda: left out")
        return
    draft.put("cuda.toolkit", release.text, seen)
    pm = _pm(facts, distro)
    _library(draft, facts, pm, "cuda.cudnn", catalog.naming(pm.package_format).cudnn(release.major)[0], "")
    names = catalog.naming(pm.package_format)
    _library(draft, facts, pm, "cuda.nccl", names.nccl()[0], f"+cuda{release.text}")
    draft.choose("cuda", Option({}, ""), Option({"cuda": DROP}, "cuda: left out"))  # after its parts


def _toolkit(toolkits: CudaToolkits | Unknown) -> tuple[DottedVersion | None, str]:
    """The toolkit a spec names: nvcc's release, else /usr/local/cuda's target, else the newest."""
    if isinstance(toolkits, Unknown):
        return None, toolkits.unknown
    others = ", ".join(t.text for t in toolkits.installed)
    also = f"; installed: {others}" if len(toolkits.installed) > 1 else ""
    if toolkits.nvcc_release is not None:
        release = toolkits.nvcc_release
        return DottedVersion(
            f"{release.major}.{release.minor}"
        ), f"nvcc {toolkits.nvcc_version or release}{also}"
    target = re.search(r"cuda-(\d+\.\d+)$", toolkits.default_target or "")
    if target:
        return DottedVersion(target[1]), f"/usr/local/cuda -> {toolkits.default_target}{also}"
    if toolkits.installed:
        return toolkits.installed[-1], f"the newest of /usr/local/cuda-X.Y{also}"
    return None, "no /usr/local/cuda-X.Y"


def _library(draft: Draft, facts: Facts, pm: PackageManager, path: str, name: str, suffix: str) -> None:
    """An installed library's exact version at ``path``; its prefixes and leaving it out as the
    other options (a prefix wins where provision's pins name it so, leaving it out where the plan
    would otherwise change it)."""
    have = _installed(facts, name)
    version = numeric_upstream(pm, have.version) if have else None
    if have is None or version is None:
        draft.note(path, f"{name} is not installed: {path} left out")
        return
    build = (
        "" if not suffix or have.version.endswith(suffix) else f" (built for another CUDA than {suffix[5:]})"
    )
    seen = f"{name} {have.version}{build}"
    draft.put(path, version.text)
    prefixes = [".".join(map(str, version.parts[:n])) for n in range(len(version.parts) - 1, 0, -1)]
    draft.choose(
        path,
        Option({}, seen),
        *(Option({path: p}, f"{seen}; {p} as provision's apt pins name it") for p in prefixes),
        Option({path: DROP}, f"{seen} installed; {path} left out"),
    )


def python_section(draft: Draft, facts: Facts, venv_given: str | None) -> None:
    """``python:`` from the venv the facts read, with torch's release and CUDA variant."""
    venv = facts.venv
    if not isinstance(venv, Venv):
        draft.note("python", _no_venv(venv, facts.torch, venv_given))
        return
    try:
        path = venv_path(absolute_path(venv.path))
    except ValueError as exc:
        draft.note("python", f"the venv {venv.path} cannot be a spec's python.venv ({exc}): python: left out")
        return
    interpreter = venv.python
    if interpreter is None:
        draft.note("python", f"{venv.path}/pyvenv.cfg names no Python version: python: left out")
        return
    draft.put(
        "python.interpreter",
        f"{interpreter.major}.{interpreter.minor}",
        f"{path}/pyvenv.cfg: Python {interpreter}",
    )
    draft.put("python.venv", path)
    _torch(draft, facts.torch, path)
    others = len(venv.distributions) - ("torch" in venv.distributions)
    if others:
        draft.note(
            "python.venv",
            f"{others} other distributions are in the venv, not listed (python.packages names "
            "requirements to install)",
        )
    draft.choose("python", Option({}, ""), Option({"python": DROP}, "python: left out"))


def _no_venv(venv: NoVenv | Unknown, torch: Torch | Unknown, given: str | None) -> str:
    if isinstance(venv, NoVenv):
        return f"no venv at {venv.path} (no pyvenv.cfg): python: left out"
    if isinstance(torch, Torch) and given is None:
        return (
            because(f"torch {torch.version} was read, but not the venv it is in", venv.unknown)
            + "; python: left out; "
            "give --venv PATH"
        )
    return because("no venv found", venv.unknown) + "; python: left out"


def _torch(draft: Draft, torch: Torch | Unknown, path: str) -> None:
    """``python.torch`` and ``cuda_variant`` from torch's version (``2.11.0+cu130``)."""
    if not isinstance(torch, Torch) or torch.venv != path:
        why = torch.unknown if isinstance(torch, Unknown) else f"read in {torch.venv}"
        draft.note("python.venv", because("torch not found in the venv", why) + "; python.torch left out")
        return
    try:
        version = Version(torch.version)
    except InvalidVersion:
        draft.note(
            "python.venv",
            f"torch's version {torch.version!r} is not a PEP 440 version: python.torch left out",
        )
        return
    if version.local is None or not _VARIANT.match(version.local):
        variant = version.local or "no variant tag"
        draft.note(
            "python.venv",
            f"torch {torch.version} ({variant}) is no CUDA wheel variant of PyTorch's index "
            "(cuXYZ): python.torch left out",
        )
        return
    draft.put("python.torch", version.base_version, f"torch {torch.version} (torch/version.py)")
    draft.put("python.cuda_variant", version.local)
    draft.choose(
        "python.torch",
        Option({}, ""),
        Option(
            {"python.torch": DROP, "python.cuda_variant": DROP},
            f"torch {torch.version} installed; python.torch left out",
        ),
    )


def repository_note(draft: Draft, facts: Facts, catalog: Catalog) -> None:
    """Say so when provision's repository keyring holds another key than NVIDIA's (a mirror): the
    mirror's URL and where its key comes from are not facts detection reads, so ``repository:`` is
    left to the user."""
    locks = facts.package_locks
    found = () if isinstance(locks, Unknown) else locks.keyring_fingerprints or ()
    os = draft.data["os"]
    repo = catalog.repository(f"{os['distro']}{os['version'].replace('.', '')}", arch=os["architecture"])
    if not found or repo is None or repo.fingerprint in found:
        return
    origins = {} if isinstance(facts.origins, Unknown) else facts.origins.origins
    hosts = ", ".join(sorted(set(origins.values()))) or "not read"
    draft.note(
        "repository",
        f"provision's repository keyring holds key {', '.join(found)}, not NVIDIA's {repo.fingerprint}: "
        f"a mirror (packages from {hosts}); its URL and key source are not read: write repository: "
        f"(url, fingerprint: {found[0]}, key_url or key_file) by hand",
    )
