"""The NVIDIA Container Toolkit with CDI for one container runtime (spec ``containers:``).

Steps (component ``containers``, role ``nvidia_container_toolkit``, after the package transaction
and before the holds):

- the toolkit's four packages at the spec's exact release, from the toolkit's own repository
  (its own key, separate from the CUDA repository: apt's flat repository with Signed-By on
  Debian and Ubuntu, dnf's RPM repository with its signed metadata on Rocky and RHEL), pinned
  with the stack (apt pins, dnf versionlock entries) and held by the holds step (the
  libnvidia-container libraries must match the toolkit exactly since 1.18.0);
- ``nvidia-ctk runtime configure --runtime=docker|containerd`` where the runtime's file does
  not name the nvidia runtime yet (podman takes no configuration: it reads the CDI spec);
- the CDI spec generated where it is absent, unreadable, names another driver's libraries than
  the machine's (a driver upgrade leaves the old spec behind) or the plan changes the driver;
  the ``nvidia-cdi-refresh`` units enabled and, after a failure, re-armed (toolkit >= 1.18.0);
- the udev rule that keeps the ``/dev/char`` links the legacy hook path needs across
  ``systemctl daemon-reload``.

Refused with the reason, before anything changes: a toolkit release the catalog does not know,
a runtime that is not installed or too old for the CDI spec the toolkit writes (v0.7.0 from
1.19.1: docker >= 26.1.0, containerd >= 1.7.16, podman >= 5.1.0), a host without NVIDIA GPUs.
Sources: NVIDIA Container Toolkit install guide, CDI page, release notes and troubleshooting
(``catalog/data/containers.yaml``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from provision.catalog import Catalog
from provision.components.base import (
    Action,
    Built,
    Component,
    InstallableComponent,
    PlanContext,
    Step,
)
from provision.components.dkms import driver_changes
from provision.components.steps import change_action, noop
from provision.detect.unknown import Unknown
from provision.findings import Finding
from provision.os.base import PackageManager, Pin
from provision.spec.models import ContainersSpec, Spec
from provision.unknown import because
from provision.versions import DottedVersion

if TYPE_CHECKING:
    from provision.catalog.containers import ContainersCatalog, ToolkitRepository
    from provision.detect.domains.containers import CdiSpec, ContainerFacts, RuntimeConfig

_TAGS = ("containers",)
KEYS = ("CTK-INSTALL", "CTK-RN")


def _catalog() -> ContainersCatalog:
    """``data/containers.yaml``, loaded on first use: only a spec with containers reads it."""
    from provision.catalog.containers import load_containers

    return load_containers()


class Containers(InstallableComponent):
    """The toolkit's packages, the runtime's configuration, the CDI spec and the /dev/char links."""

    name = Component.CONTAINERS
    spec_section = "containers"
    facts = ("containers", "packages", "driver", "nvidia_pci")
    role = "nvidia_container_toolkit"
    tags = _TAGS
    stage = 1  # after the driver (a changed driver regenerates the spec), before the holds
    holds_packages = True
    verify_checks = ("container-gpus", "container-gpus-after-daemon-reload", "cdi-spec-driver")
    observer = "provision.verify.checks_containers:OBSERVER"

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        if spec.containers is None:
            return ()
        return tuple(spec_findings(spec.containers, catalog, _catalog()))

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        if ctx.spec.containers is None:
            return ()
        return (*self.spec_rules(ctx.spec, ctx.catalog), *machine_findings(ctx, ctx.spec.containers))

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        wanted = ctx.spec.containers
        if wanted is None or _catalog().release(wanted.toolkit) is None:
            return ()
        packages = packages_step(ctx, wanted)
        return (
            packages,
            runtime_step(ctx, wanted),
            cdi_step(ctx, wanted, packages.changes),
            dev_char_step(ctx),
        )

    def pins(self, spec: Spec, pm: PackageManager) -> tuple[Pin, ...]:
        if spec.containers is None:
            return ()
        cat = _catalog()
        return (
            Pin(
                packages=" ".join(f"{n}*" for n in ("nvidia-container-toolkit", "libnvidia-container")),
                version=pm.version_glob(spec.containers.toolkit),
                why=f"NVIDIA Container Toolkit {spec.containers.toolkit} ({', '.join(cat.packages.names)})",
            ),
        )

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        wanted = ctx.spec.containers
        if wanted is None:
            return {}
        return role_variables(ctx, wanted, _catalog())

    def role_keys(self, ctx: PlanContext) -> dict[str, dict[str, Any]]:
        wanted = ctx.spec.containers
        if wanted is None:
            return {}
        return {"keyring_src": key_source(wanted, _catalog().repository(ctx.pm.package_format))}


def spec_findings(wanted: ContainersSpec, catalog: Catalog, cat: ContainersCatalog) -> Iterator[Finding]:
    """The toolkit release the catalog does not know (``validate`` runs it too)."""
    if cat.release(wanted.toolkit) is None:
        known = ", ".join(str(r.version) for r in cat.releases)
        yield Finding(
            rule="containers-toolkit-unknown",
            severity="blocker",
            message=f"containers.toolkit {wanted.toolkit} is not an NVIDIA Container Toolkit release the "
            f"catalog knows; known: {known}",
            source=catalog.cite(("CTK-RN",)),
        )


def machine_findings(ctx: PlanContext, wanted: ContainersSpec) -> Iterator[Finding]:
    """A host without NVIDIA GPUs, a runtime missing or too old for the CDI spec the toolkit writes."""
    cat, facts = _catalog(), ctx.facts
    pci = facts.nvidia_pci
    if not isinstance(pci, Unknown) and not [d for d in pci if not d.is_nvswitch]:
        yield _blocker(
            ctx,
            "containers-no-gpu",
            "containers: this host has no NVIDIA GPU (lspci lists no NVIDIA display or 3D controller); "
            "the toolkit would have nothing to hand to containers",
        )
    found = facts.containers.runtime(wanted.runtime) if facts.containers is not None else None
    row = cat.runtime(wanted.runtime)
    if isinstance(found, Unknown):
        yield _blocker(
            ctx,
            "containers-runtime-missing",
            because(f"containers.runtime {wanted.runtime} is not usable on this host", found.unknown)
            + "; install "
            f"{row.install[ctx.pm.package_format]} first",  # type: ignore[index]
            keys=(*KEYS, "DOCKER-RHEL") if ctx.pm.package_format != "deb" else KEYS,
        )
        return
    if found is not None and cat.writes_v070(wanted.toolkit) and found.version < row.v070_min:
        yield _blocker(
            ctx,
            "containers-cdi-version",
            f"{wanted.runtime} {found.version} reads CDI specs older than v0.7.0, and NVIDIA Container "
            f"Toolkit {wanted.toolkit} writes v0.7.0 (from {cat.features.cdi_v070_default.since}; it needs "
            f"{wanted.runtime} >= {row.v070_min}): upgrade {wanted.runtime} or choose containers.toolkit "
            "1.19.0 or older",
        )
    if found is not None and row.cdi_min is not None and found.version < row.cdi_min:
        yield Finding(
            rule="containers-no-cdi",
            severity="warning",
            message=f"{wanted.runtime} {found.version} reads no CDI specs (from {row.cdi_min}): containers "
            "get GPUs only through the nvidia runtime's hook (--runtime=nvidia --gpus all), kept across "
            "systemctl daemon-reload by the /dev/char links",
            source=ctx.catalog.cite(("CTK-TROUBLE", "CDI-84")),
        )


def _blocker(ctx: PlanContext, rule: str, message: str, keys: tuple[str, ...] = KEYS) -> Finding:
    return Finding(rule=rule, severity="blocker", message=message, source=ctx.catalog.cite(keys))


def packages_step(ctx: PlanContext, wanted: ContainersSpec) -> Step:
    """The four packages at the spec's release: one request each, all four whenever any differs
    (the libraries must match the toolkit exactly)."""
    cat = _catalog()
    have = {n: ctx.installed(n) for n in cat.packages.names}
    versions = {n: ctx.upstream(p) if p else None for n, p in have.items()}
    if all(v == wanted.toolkit for v in versions.values()):
        return noop(
            Component.CONTAINERS,
            current=str(wanted.toolkit),
            target=str(wanted.toolkit),
            reason=f"NVIDIA Container Toolkit {wanted.toolkit} installed ({', '.join(cat.packages.names)})",
        )
    present = {n: v for n, v in versions.items() if v is not None}
    mixed = len(set(map(str, present.values()))) > 1
    current = ", ".join(f"{n} {v}" for n, v in present.items()) if mixed else _one(present)
    glob = ctx.pm.version_glob(wanted.toolkit)
    reason = (
        f"the toolkit's packages are at mixed versions ({current}); since 1.18.0 the libnvidia-container "
        f"libraries must be at exactly the toolkit's version: all four to {wanted.toolkit}"
        if mixed
        else f"NVIDIA Container Toolkit {wanted.toolkit} from NVIDIA's libnvidia-container repository "
        "(its own signed source and keyring), the four packages at one version"
    )
    return Step(
        component=Component.CONTAINERS,
        action=Action.UPGRADE if mixed else change_action(_lowest(present), wanted.toolkit),
        current=current,
        target=str(wanted.toolkit),
        packages=tuple(ctx.pm.request(n, glob) for n in cat.packages.names),
        tags=_TAGS,
        reason=reason,
    )


def _one(present: dict[str, DottedVersion]) -> str:
    return str(next(iter(present.values()))) if present else "absent"


def _lowest(present: dict[str, DottedVersion]) -> DottedVersion | None:
    return min(present.values()) if present else None


def runtime_step(ctx: PlanContext, wanted: ContainersSpec) -> Step:
    """``nvidia-ctk runtime configure`` for docker and containerd unless their file names the nvidia
    runtime (with CDI on where the runtime reads CDI); podman needs nothing."""
    row = _catalog().runtime(wanted.runtime)
    if not row.configure:
        return noop(
            Component.CONTAINERS,
            target=wanted.runtime,
            reason=f"{wanted.runtime} reads the CDI spec itself: nvidia-ctk runtime configure does not take "
            "it (NVIDIA recommends CDI for podman)",
        )
    config = _runtime_config(ctx.facts.containers, wanted.runtime)
    if isinstance(config, Unknown):
        state = because("not observed", config.unknown)
    elif config.problem is not None:
        state = f"unreadable ({config.problem})"
    elif config.nvidia_runtime and (config.cdi_enabled or "--cdi.enabled" not in configure_argv(ctx, wanted)):
        return noop(
            Component.CONTAINERS,
            current=row.config_file,
            target=row.config_file,
            reason=f"{row.config_file} names the nvidia runtime"
            + (" with CDI on" if config.cdi_enabled else " (this release reads no CDI specs)"),
        )
    else:
        state = "nvidia runtime absent" if not config.nvidia_runtime else "CDI not turned on"
    return Step(
        component=Component.CONTAINERS,
        action=Action.CONFIGURE,
        current=state,
        target=f"{row.config_file}: nvidia runtime, CDI on",
        tags=_TAGS,
        reason=f"{' '.join(configure_argv(ctx, wanted))} writes the nvidia runtime into {row.config_file}; "
        f"{row.service} restarts to read it",
    )


def _runtime_config(found: ContainerFacts | None, runtime: str) -> RuntimeConfig | Unknown:
    if found is None:
        return Unknown(unknown="not probed")
    if isinstance(found.config, Unknown):
        return found.config
    return found.config.docker if runtime == "docker" else found.config.containerd


def expected_driver(ctx: PlanContext) -> str | None:
    """The driver the CDI spec must name: the loaded module's, else the installed user space's."""
    from provision.detect.domains.driver import LoadedDriver

    loaded = ctx.facts.driver
    if isinstance(loaded, LoadedDriver):
        return str(loaded.version)
    userspace = ctx.facts.userspace_driver(ctx.pm.upstream)
    return str(userspace) if userspace is not None else None


def cdi_step(ctx: PlanContext, wanted: ContainersSpec, toolkit_changes: bool) -> Step:
    """Generate the CDI spec (and arm the refresh units) unless the one there names this driver."""
    cat = _catalog()
    path = cat.spec_file(wanted.toolkit)
    why = _stale(ctx, wanted, path, toolkit_changes)
    if why is None:
        spec = _nvidia_spec(ctx.facts.containers, path, cat.cdi.kind)
        assert spec is not None
        return noop(
            Component.CONTAINERS,
            current=path,
            target=path,
            reason=f"{path} names driver {spec.driver}'s libraries and devices {', '.join(spec.devices)}"
            + ("; the refresh units are armed" if cat.has_refresh(wanted.toolkit) else ""),
        )
    refresh = (
        "; enable and re-arm nvidia-cdi-refresh.path, which regenerates it when the driver changes"
        if cat.has_refresh(wanted.toolkit)
        else "; this toolkit has no refresh units (from 1.18.0): apply regenerates it after a driver change"
    )
    return Step(
        component=Component.CONTAINERS,
        action=Action.CONFIGURE,
        current=why,
        target=path,
        tags=_TAGS,
        reason=f"nvidia-ctk cdi generate --output={path}{refresh}",
    )


def _stale(ctx: PlanContext, wanted: ContainersSpec, path: str, toolkit_changes: bool) -> str | None:
    """Why the spec at ``path`` must be written again; None when it is current."""
    found = ctx.facts.containers
    if toolkit_changes:
        return "the toolkit changes"
    if driver_changes(ctx):
        return "the driver changes in this plan"
    if found is None or isinstance(found.cdi, Unknown):
        return because("not observed", found.cdi.unknown if found is not None else "not probed")  # type: ignore[union-attr]
    spec = _nvidia_spec(found, path, _catalog().cdi.kind)
    if spec is None:
        return "absent"
    if spec.problem is not None:
        return f"unreadable ({spec.problem})"
    driver = expected_driver(ctx)
    if driver is not None and spec.driver != driver:
        return f"names driver {spec.driver or 'none'}'s libraries, the driver is {driver} (a driver change)"
    return _refresh_problem(ctx, wanted)


def _refresh_problem(ctx: PlanContext, wanted: ContainersSpec) -> str | None:
    """Why the refresh units must be re-armed (a failed start takes the path unit down with it)."""
    found = ctx.facts.containers
    if not _catalog().has_refresh(wanted.toolkit) or found is None or isinstance(found.refresh, Unknown):
        return None  # no units in this release, or no systemd to ask: nothing to arm
    failed = [u for u, s in found.refresh.units.items() if s.failed]
    if failed:
        return f"{', '.join(failed)} failed"
    path = found.refresh.units.get("nvidia-cdi-refresh.path")
    if path is not None and path.exists and (path.active != "active" or path.enabled != "enabled"):
        return f"nvidia-cdi-refresh.path is {path.active or 'unknown'} and {path.enabled or 'not enabled'}"
    return None


def _nvidia_spec(found: ContainerFacts | None, path: str, kind: str) -> CdiSpec | None:
    if found is None or isinstance(found.cdi, Unknown):
        return None
    return next((s for s in found.cdi.specs if s.path == path), None)


def dev_char_step(ctx: PlanContext) -> Step:
    """The udev rule that creates the ``/dev/char`` links when the nvidia driver binds."""
    from provision.detect.domains.containers import DEV_CHAR_RULE

    text = dev_char_rule(_catalog())
    found = ctx.facts.containers
    have = None if found is None or isinstance(found.config, Unknown) else found.config.dev_char_rule
    if have is not None and have.strip() == text.strip():
        return noop(
            Component.CONTAINERS,
            current=DEV_CHAR_RULE,
            target=DEV_CHAR_RULE,
            reason=f"{DEV_CHAR_RULE} keeps the /dev/char links of the NVIDIA devices",
        )
    return Step(
        component=Component.CONTAINERS,
        action=Action.CONFIGURE,
        current="absent" if have is None else "another rule",
        target=DEV_CHAR_RULE,
        tags=_TAGS,
        reason=f"write {DEV_CHAR_RULE} and create the /dev/char links now (nvidia-ctk system "
        "create-dev-char-symlinks): without them runc drops the GPUs of a container started through the "
        "legacy hook when systemd reloads units",
    )


def dev_char_rule(cat: ContainersCatalog) -> str:
    """The rule file's whole text."""
    head = "# Managed by provision: /dev/char links for NVIDIA devices (NVIDIA/nvidia-docker#1671).\n"
    return f"{head}{cat.dev_char.rule}\n"


def key_source(wanted: ContainersSpec, repo: ToolkitRepository) -> dict[str, Any]:
    """Where the controller reads the toolkit repository's key (the spec's mirror or NVIDIA's
    ``repo``, the host's package format's)."""
    mirror = wanted.repository
    if mirror is None:
        return {
            "url": repo.key_url,
            "file": None,
            "hosts": list(repo.key_hosts),
            "fingerprint": repo.fingerprint,
        }
    return {
        "url": str(mirror.key_url) if mirror.key_url else None,
        "file": mirror.key_file,
        "hosts": list(mirror.key_hosts),
        "fingerprint": mirror.fingerprint,
    }


def role_variables(ctx: PlanContext, wanted: ContainersSpec, cat: ContainersCatalog) -> dict[str, Any]:
    """The role's variables, from the plan's containers steps (unprefixed)."""
    from provision.detect.domains.containers import DEV_CHAR_RULE

    packages = packages_step(ctx, wanted)
    row, path = cat.runtime(wanted.runtime), cat.spec_file(wanted.toolkit)
    repo = cat.repository(ctx.pm.package_format)
    mirror = wanted.repository
    url = str(mirror.url) if mirror else repo.urls[ctx.spec.os.architecture]
    fingerprint = mirror.fingerprint if mirror else repo.fingerprint
    return {
        "url": url,
        "keyring_src": "",
        "fingerprint": fingerprint,
        "source": source_text(repo, url, fingerprint),
        "keyring": repo.keyring,
        "sources_file": repo.sources_file,
        "repo_id": repo.repo_id or "",
        "packages": list(packages.packages) if packages.changes else [],
        "runtime": wanted.runtime,
        "configure_argv": configure_argv(ctx, wanted) if runtime_step(ctx, wanted).changes else [],
        "runtime_service": row.service or "",
        "cdi_spec_file": path,
        "cdi_generate": cdi_step(ctx, wanted, packages.changes).changes,
        "cdi_refresh": cat.has_refresh(wanted.toolkit),
        "dev_char_rule": dev_char_rule(cat),
        "dev_char_rule_file": DEV_CHAR_RULE,
    }


def source_text(repo: ToolkitRepository, url: str, fingerprint: str) -> str:
    """The toolkit repository's source file for ``repo``'s package format: apt's deb822 source,
    else dnf's ``.repo`` section (:func:`repo_file_text`)."""
    if repo.repo_id is not None:
        return repo_file_text(repo.repo_id, url, repo.keyring, fingerprint)
    return (
        "# Managed by provision: NVIDIA's libnvidia-container repository (the container toolkit), signed,\n"
        "# fingerprint pinned in provision's catalog.\n"
        f"Types: deb\nURIs: {url}\nSuites: /\nSigned-By: {repo.keyring} {fingerprint}\n"
    )


def repo_file_text(repo_id: str, url: str, keyring: str, fingerprint: str) -> str:
    """dnf's section for the toolkit repository, with the settings of NVIDIA's own
    ``nvidia-container-toolkit.repo``: the metadata signature checked (``repo_gpgcheck=1``), the
    packages not (``gpgcheck=0``: the repository signs its metadata, which carries each package's
    checksum), the key read from the verified file (dnf.conf(5) ``gpgkey``)."""
    return (
        "# Managed by provision: NVIDIA's libnvidia-container repository (the container toolkit), its\n"
        f"# metadata signed by the key {fingerprint}, fingerprint pinned in provision's catalog.\n"
        f"[{repo_id}]\nname=NVIDIA Container Toolkit (libnvidia-container)\nbaseurl={url}\nenabled=1\n"
        f"repo_gpgcheck=1\ngpgcheck=0\ngpgkey=file://{keyring}\n"
    )


def configure_argv(ctx: PlanContext, wanted: ContainersSpec) -> list[str]:
    """``nvidia-ctk runtime configure --runtime=R`` with ``--cdi.enabled`` where R reads CDI specs."""
    row = _catalog().runtime(wanted.runtime)
    found = ctx.facts.containers.runtime(wanted.runtime) if ctx.facts.containers is not None else None
    reads_cdi = row.cdi_min is None or (
        found is not None and not isinstance(found, Unknown) and found.version >= row.cdi_min
    )
    return [
        "nvidia-ctk",
        "runtime",
        "configure",
        f"--runtime={wanted.runtime}",
        *(["--cdi.enabled"] if reads_cdi else []),
    ]
