"""NVIDIA's CUDA repository: signed source with a pinned key fingerprint, and the version pins.

The pins make one transaction resolve every package of a family to the spec's version (the
package manager otherwise takes the newest candidate for dependencies, the FF-02 drift).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.spec.models import KEY_HOSTS, Spec


class Repository(InstallableComponent):
    """The repository source, keyring and pins, written when the transaction needs them or the pins drift."""

    name = Component.REPOSITORY
    spec_section = "repository"
    facts = ("package_locks",)
    role = "nvidia_repository"
    tags = ("repository",)
    stage = 2

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        return (repository_step(ctx),)

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        return repo_vars(ctx)

    def role_keys(self, ctx: PlanContext) -> dict[str, dict[str, Any]]:
        return {"keyring_src": key_source(ctx)} if nvidia_repo_needed(ctx.spec) else {}


def repository_step(ctx: PlanContext) -> Step:
    """Configure the repository for a transaction, rewrite drifted pins, or say why not."""
    spec, files = ctx.spec, ctx.pm.files
    if ctx.transaction_requests() and not nvidia_repo_needed(spec):
        return Step(
            component=Component.REPOSITORY,
            action=Action.CONFIGURE,
            target=files.pins,
            tags=Repository.tags,
            reason=f"{ctx.pm.lock_noun} for the spec's versions of the {spec.os.distro} driver; NVIDIA's "
            "repository is not configured (nothing is installed from it)",
        )
    if ctx.transaction_requests():
        return Step(
            component=Component.REPOSITORY,
            action=Action.CONFIGURE,
            target=files.sources,
            tags=Repository.tags,
            reason=f"NVIDIA CUDA repository for {spec.os.repo_code}, {ctx.pm.source_note}, and "
            f"{ctx.pm.lock_noun} for the spec's versions",
        )
    add_ons = _add_ons_missing(ctx)
    if add_ons:
        packages = ", ".join(ctx.pm.repository_package(r) for r in add_ons)
        return Step(
            component=Component.REPOSITORY,
            action=Action.CONFIGURE,
            current="absent",
            target=packages,
            tags=Repository.tags,
            reason=f"enable {', '.join(add_ons)} ({packages}): packages of this plan come from it",
        )
    rotated = _key_drift(ctx)
    if rotated:
        return Step(
            component=Component.REPOSITORY,
            action=Action.CONFIGURE,
            current=rotated[0],
            target=rotated[1],
            tags=Repository.tags,
            reason=rotated[2],
        )
    drift = _pins_drift(ctx)
    if drift:
        return Step(
            component=Component.REPOSITORY,
            action=Action.CONFIGURE,
            target=files.pins,
            tags=Repository.tags,
            reason=drift,
        )
    return noop(
        Component.REPOSITORY,
        reason=f"no package to install from NVIDIA's repository; {ctx.pm.lock_noun} in place"
        if spec.driver.hold
        else "no package to install from NVIDIA's repository",
    )


def nvidia_repo_needed(spec: Spec) -> bool:
    """Whether anything comes from NVIDIA's repository: its driver, or the CUDA stack (which may sit
    beside a distribution's driver; NVIDIA's driver metas never do, see driver.forbidden_packages)."""
    return spec.driver.source == "nvidia-repo" or spec.cuda is not None


def _key_drift(ctx: PlanContext) -> tuple[str, str, str] | None:
    """(current, target, reason) when the installed keyring lacks the spec's key fingerprint: a rotated
    key, or a keyring gone from a box whose pins provision wrote; None when it holds it or is unread."""
    locks = ctx.facts.package_locks
    fingerprint = str(repo_vars(ctx)["fingerprint"]).upper()
    if isinstance(locks, Unknown) or locks.keyring_fingerprints is None or not fingerprint:
        return None
    found = locks.keyring_fingerprints
    if fingerprint in found:
        return None
    keyring = ctx.pm.files.keyring
    if not found:
        if locks.pins is None:
            return None  # never configured by provision, and no package to install: nothing to repair
        return "absent", f"key {fingerprint}", f"repository keyring {keyring} missing; install the spec's key"
    current = ", ".join(found)
    return (
        f"key {current}",
        f"key {fingerprint}",
        f"repository key rotated: {keyring} holds {current}, the spec pins {fingerprint}; install the new "
        "key so the package manager can verify the repository again",
    )


def _pins_drift(ctx: PlanContext) -> str | None:
    """Why the pins must be rewritten (held stack only) or moved out of a legacy file, or None."""
    locks = ctx.pm.lock_state(ctx.facts.package_locks)
    if isinstance(locks, Unknown):
        return None
    if locks.legacy_pins:
        return (
            f"apt pins in {', '.join(locks.legacy_pins)}, which apt reads after NVIDIA's "
            "nvidia-driver-pinning-<branch> file; the first pin matching a version sets its priority "
            "(apt_preferences(5)), so that file's 1000 hides provision's 1001 and apt refuses a downgrade "
            f"within the branch: move them to {ctx.pm.files.pins}"
        )
    if not ctx.spec.driver.hold:
        return None
    if locks.pins == ctx.pins_text():
        return None
    state = "missing" if locks.pins is None else "drifted from the spec"
    return (
        f"{ctx.pm.lock_noun} {ctx.pm.files.pins} {state}; rewrite them so the package manager cannot move "
        "the stack"
    )


def repo_vars(ctx: PlanContext) -> dict[str, Any]:
    """The repository role's variables: the spec's mirror or the catalog's repository, and the files
    (the keyring's path on the controller is filled in at apply time, :meth:`Repository.role_keys`)."""
    spec, files = ctx.spec, ctx.pm.files
    override = spec.repository
    repo = ctx.catalog.repository(spec.os.repo_code, arch=spec.os.architecture)
    needed = nvidia_repo_needed(spec)
    return {
        "url": (str(override.url) if override else (repo.url if repo else "")) if needed else "",
        "keyring_src": "",
        "fingerprint": (override.fingerprint if override else (repo.fingerprint if repo else ""))
        if needed
        else "",
        "keyring": files.keyring,
        "sources_file": files.sources,
        "preferences_file": files.pins,
        "preferences": ctx.pins_text(),
        "legacy_preferences_files": list(files.legacy_pins),
        "add_on_packages": [ctx.pm.repository_package(r) for r in add_on_repositories(ctx)],
    }


def add_on_repositories(ctx: PlanContext) -> tuple[str, ...]:
    """The repositories beyond the OS's own and NVIDIA's that the plan installs packages from (EPEL
    on RHEL, for DKMS and the node exporter), in step order; the family's seam says which."""
    wanted = (
        r for s in ctx.steps() if s.changes and s.packages for r in ctx.pm.add_on_repositories(s.component)
    )
    return tuple(dict.fromkeys(wanted))


def _add_ons_missing(ctx: PlanContext) -> tuple[str, ...]:
    """Those of :func:`add_on_repositories` whose release package is not installed (unread counts as
    missing: installing a release package that is there changes nothing)."""
    return tuple(r for r in add_on_repositories(ctx) if ctx.installed(ctx.pm.repository_package(r)) is None)


def key_source(ctx: PlanContext) -> dict[str, Any]:
    """Where the controller reads the signing key: a URL (and the hosts it may name) or a file, and
    the fingerprint it must have."""
    override = ctx.spec.repository
    if override is None:
        repo = ctx.catalog.repository(ctx.spec.os.repo_code, arch=ctx.spec.os.architecture)
        return {
            "url": repo.key_url if repo else "",
            "file": None,
            "hosts": list(KEY_HOSTS),
            "fingerprint": repo.fingerprint if repo else "",
        }
    return {
        "url": str(override.key_url) if override.key_url else None,
        "file": override.key_file,
        "hosts": [*KEY_HOSTS, *override.key_hosts],
        "fingerprint": override.fingerprint,
    }
