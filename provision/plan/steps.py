"""Helpers shared by the step builders: comparing package versions to targets.

All functions are pure; they read :class:`~provision.detect.facts.Facts` and
return text or values, never run commands.
"""

from __future__ import annotations

from provision.detect.facts import Facts, Package
from provision.plan.models import Action, Component, Step
from provision.versions import DottedVersion, deb_upstream


def installed(facts: Facts, name: str) -> Package | None:
    """The package ``name`` when dpkg has it fully installed, else None."""
    pkg = facts.package(name)
    return pkg if pkg is not None and pkg.installed else None


def upstream(pkg: Package) -> DottedVersion | None:
    """Numeric upstream version of a package (``580.95.05-1`` -> 580.95.05), None if not numeric."""
    text = deb_upstream(pkg.version).split("+")[0].split("~")[0]
    try:
        return DottedVersion(text)
    except ValueError:
        return None


CUDNN_VERSION_PARTS = 4
"""cuDNN versions have four fields: ``9.14.0.64-1`` (H200 capture), ``9.20.0.48-1`` (NVIDIA repository)."""
NCCL_VERSION_PARTS = 3
"""NCCL versions have three fields: ``2.28.3-1+cuda13.0`` (H200 capture, tests/fixtures/raw)."""


def version_glob(target: DottedVersion, suffix: str = "", full_parts: int = 3) -> str:
    """An apt version pattern (fnmatch, as ansible.builtin.apt accepts) for ``target``.

    A full version (``full_parts`` fields or more, ``9.14.0.64`` for cuDNN) matches
    any Debian revision: ``9.14.0.64-*``; a prefix (``9.14`` or ``9.14.0``) matches
    every release under it: ``9.14.0.*``, as :meth:`DottedVersion.matches` does.
    ``suffix`` is appended (``+cuda13.0`` for NCCL).
    """
    full = len(target.parts) >= full_parts
    return f"{target}-*{suffix}" if full else f"{target}.*{suffix}"


def change_action(current: DottedVersion | None, target: DottedVersion) -> Action:
    """install when absent, else upgrade or downgrade towards ``target``."""
    if current is None:
        return Action.INSTALL
    return Action.UPGRADE if current < target else Action.DOWNGRADE


def noop(component: Component, reason: str, current: str | None = None, target: str | None = None) -> Step:
    """A step that changes nothing and says why."""
    return Step(component=component, action=Action.NOOP, reason=reason, current=current, target=target)
