"""The OS-neutral models every OS family's detection produces: installed packages, where they came
from, and provision's package locks. ``Facts``, the components, plan, apply, lock and rollback read
only these; what a family's tools print is parsed into them by :mod:`provision.os.debian` or
:mod:`provision.os.redhat`.

Saved facts written before the OS seam carry dpkg's status words (``status``) and apt-named lock
fields; the models read them still (:func:`provision.os.debian.dpkg.package_state`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from provision.models import Frozen


class Package(Frozen):
    """One installed (or partly installed) package, as the package database knows it.

    Attributes:
        name: The package name (``nvidia-driver``, ``libnvidia-compute-580``).
        version: The version in the family's syntax (Debian ``580.95.05-0ubuntu1``; RPM EVR
            ``3:580.95.05-1.el9``, the epoch written only when not 0).
        installed: Fully installed (dpkg ``installed``; an rpm database entry).
        held: Kept at its version by the package manager (dpkg selection ``hold``; a dnf
            versionlock entry or an enabled module stream's bound, as the family reads it).
        unfinished: Its installation stopped before its end: the package manager's next
            transaction refuses or repairs first (dpkg ``half-configured``, ``unpacked``...).
        state: The package manager's own words for the state (dpkg's ``install ok installed``),
            read by the family's repair advice; empty where the family has none.
        arch: The package's architecture where the family's version leaves it out (rpm's
            ``x86_64``: a kernel's release is ``<version>.<arch>``); empty otherwise.
    """

    name: str
    version: str
    installed: bool = True
    held: bool = False
    unfinished: bool = False
    state: str = ""
    arch: str = ""

    @model_validator(mode="before")
    @classmethod
    def _legacy_status(cls, data: Any) -> Any:
        """Saved facts of before the seam: ``{"name", "version", "status": "<dpkg words>"}``."""
        if isinstance(data, dict) and "status" in data and "installed" not in data:
            from provision.os.debian.dpkg import package_state

            rest = {k: v for k, v in data.items() if k != "status"}
            return {**rest, **package_state(str(data["status"]))}
        return data


_LEGACY_LOCK_KEYS = {
    "preferences": "pins",
    "legacy_preferences": "legacy_pins",
    "unattended_guard": "upgrade_guard",
    "unattended_upgrades_installed": "upgrade_service_installed",
    "dpkg_journal": "unfinished_transactions",
}


class PackageLocks(Frozen):
    """provision's package locks, upgrade guard and repository key as found on the machine.

    Where each lives is the family's (:attr:`provision.os.base.ManagedFiles`): apt preferences and an
    unattended-upgrades configuration on Debian, a dnf versionlock list and a dnf-automatic
    exclusion on RedHat.
    """

    pins: str | None = Field(None, description="Content of provision's pins (locks) file; None when absent.")
    legacy_pins: str | None = Field(
        None, description="Content of the pins file older releases of provision wrote; None when absent."
    )
    upgrade_guard: str | None = Field(
        None, description="Content of provision's automatic-upgrade guard; None when absent."
    )
    upgrade_service_installed: bool = Field(
        False, description="The automatic-upgrade service is installed (unattended-upgrades, dnf-automatic)."
    )
    keyring_fingerprints: tuple[str, ...] | None = Field(
        None,
        description="v4 fingerprints of the primary keys in provision's repository keyring (upper-case "
        "hex); empty when the file is absent or holds no readable key; None when not read (older captures).",
    )
    unfinished_transactions: int | None = Field(
        None,
        description="Package transactions that did not finish (dpkg's journal entries; the package "
        "manager refuses or repairs first while any are there); None when not read (older captures).",
    )
    reboot_required: tuple[str, ...] | None = Field(
        None,
        description="Packages the OS flags as needing a reboot (empty when the flag names none); None "
        "when there is no flag or it was not read.",
    )
    streams: tuple[str, ...] | None = Field(
        None,
        description="Enabled module streams of the NVIDIA driver (``nvidia-driver:580-open``); None "
        "where the family or release has no modules.",
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        """Saved facts of before the seam name the fields after apt (``preferences``, ``dpkg_journal``)."""
        if isinstance(data, dict) and any(k in data for k in _LEGACY_LOCK_KEYS):
            return {_LEGACY_LOCK_KEYS.get(k, k): v for k, v in data.items()}
        return data

    @property
    def interrupted(self) -> bool:
        """A package transaction stopped before its end."""
        return bool(self.unfinished_transactions)


class PackageOrigins(Frozen):
    """Where each installed NVIDIA driver package came from (FF-08).

    ``origins`` maps a package name to the host of the repository that serves its installed
    version (``developer.download.nvidia.com``, ``archive.ubuntu.com``), or ``local`` when only
    the package database knows it (a runfile, a removed repository, a hand-installed package).
    """

    origins: dict[str, str] = Field(default_factory=dict)
