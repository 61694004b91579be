"""``provision-resume.service``: the one-shot unit that finishes an apply on this machine after boot.

Ansible's reboot module refuses to reboot the machine it runs on (its ``local`` connection check),
so on this machine ``apply --reboot`` leaves the rest to systemd: a ``Type=oneshot`` unit, ordered
after ``network-online.target`` (apt and pip need the network) and started only while the resume
record exists (``ConditionPathExists=``, systemd.unit(5)), runs ``provision resume --unit`` once;
the resume removes the unit, its ``multi-user.target.wants`` link and the record when it ends, so it
never runs again (a pending MOK enrollment keeps them for the next boot).

The unit is rendered in Python from an argv list (no template, no shell): each element quoted
with systemd's command-line rules (:func:`provision.serving.unit.systemd_quote`; control
characters refused). Its argv holds paths only: this interpreter, ``-I`` (isolated: no
``PYTHONPATH``, no user site, not the working directory) and ``-m provision resume --unit``; the
record names the rest. Everything it runs must be trusted (:func:`run_as_root_problem`, the rule
of :mod:`provision.trust`): the interpreter and its prefix, the provision package and its
playbooks, each file and directory owned by root or the invoking user and writable by no one else.
Enabling is the link ``systemctl enable`` would make (systemd.unit(5), "[Install] Section
Options": ``WantedBy=`` creates a ``.wants/`` symlink), so the unit is enabled even where systemd
is not running yet (a chroot, an image).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from provision import trust
from provision.reboot.record import RESUME_FILE
from provision.resources import data_dir
from provision.serving.unit import exec_start, systemd_quote

UNIT_NAME = "provision-resume.service"
UNIT_DIR = Path("/etc/systemd/system")
WANTS_DIR = UNIT_DIR / "multi-user.target.wants"


def resume_argv(python: str | None = None) -> tuple[str, ...]:
    """The unit's argv, ``<python> -I -m provision resume --unit``: paths only, the record says the rest."""
    return (python or sys.executable, "-I", "-m", "provision", "resume", "--unit")


def unit_text(argv: tuple[str, ...], record: Path = RESUME_FILE) -> str:
    """The unit file for ``argv``, started at boot only while ``record`` exists.

    Raises:
        ValueError: An element of ``argv`` or the record path holds a control character.
    """
    return (
        "# Written by provision apply --reboot; provision resume removes it when it has run.\n"
        "[Unit]\n"
        "Description=provision: finish the apply after the reboot (runs once)\n"
        "Documentation=man:systemd.service(5)\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        f"ConditionPathExists={_plain_path(record)}\n"
        "\n[Service]\n"
        "Type=oneshot\n"
        # A system service gets no HOME (systemd.exec(5), "Environment Variables in Spawned
        # Processes": set for User= only); Ansible's local connection expands ~ for its temp dir.
        "Environment=HOME=/root LANG=C.UTF-8\n"
        f"ExecStart={exec_start(argv)}\n"
        "RemainAfterExit=no\n"
        # apt, a DKMS build and pip may take a while; the default start timeout (90 s) would kill them.
        "TimeoutStartSec=infinity\n"
        "\n[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def _plain_path(path: Path) -> str:
    """``path`` for a directive that takes a path, not a command line (no quoting there): plain only.

    Raises:
        ValueError: The path holds a character other than letters, digits and ``._/:=+,@-``.
    """
    if not path.is_absolute() or systemd_quote(str(path)) != str(path):
        raise ValueError(f"not a plain absolute path for a unit file: {str(path)!r}")
    return str(path)


def install_unit(text: str, root: Path = Path("/")) -> Path:
    """Write the unit (0644) and its ``multi-user.target.wants`` link under ``root``; returns the unit."""
    unit = root / UNIT_DIR.relative_to("/") / UNIT_NAME
    wants = root / WANTS_DIR.relative_to("/")
    wants.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = unit.with_name(f".{UNIT_NAME}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o644)
    os.replace(tmp, unit)
    link = wants / UNIT_NAME
    link.unlink(missing_ok=True)
    link.symlink_to(UNIT_DIR / UNIT_NAME)
    return unit


def remove_unit(root: Path = Path("/")) -> None:
    """Remove the unit and its link (missing ones are fine)."""
    (root / WANTS_DIR.relative_to("/") / UNIT_NAME).unlink(missing_ok=True)
    (root / UNIT_DIR.relative_to("/") / UNIT_NAME).unlink(missing_ok=True)


def installed(root: Path = Path("/")) -> bool:
    """Whether the unit file is in place under ``root``."""
    return (root / UNIT_DIR.relative_to("/") / UNIT_NAME).exists()


def run_as_root_problem(python: str | None = None) -> str | None:
    """Why the unit would run, as root, something a user other than root could have written; or None.

    Checks, by the trust rule (:mod:`provision.trust`), the interpreter (its path), its prefix (a
    venv: every file below it), and the provision package and its playbooks (every file below them).
    """
    exe = Path(python or sys.executable)
    if (why := trust.problem("file", str(exe))) is not None:
        return f"the interpreter: {why}"
    prefix = Path(sys.prefix) if python is None else exe.parent.parent
    package = Path(__file__).resolve().parents[1]
    tops = (("the interpreter's prefix", prefix), ("the provision package", package))
    for name, top in (*tops, ("provision's playbooks", data_dir("playbooks"))):
        if (why := trust.problem("tree", str(top))) is not None:
            return f"{name}: {why}"
    return None


def other_package_problem(python: str | None = None) -> str | None:
    """Why ``<python> -I -m provision`` would not import this very provision package; or None.

    ``-I`` leaves out the working directory and ``PYTHONPATH``, so a provision run from a source
    tree that is not installed into the interpreter would be another (or none) at boot.
    """
    exe = python or sys.executable
    done = subprocess.run(
        [exe, "-I", "-c", "import provision, sys; sys.stdout.write(provision.__file__)"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": os.defpath, "LANG": "C.UTF-8"},
    )
    here = str(Path(__file__).resolve().parents[1] / "__init__.py")
    found = done.stdout.strip()
    if done.returncode != 0 or not found:
        return f"`{exe} -I -m provision` finds no provision package (install provision into that interpreter)"
    if str(Path(found).resolve()) != here:
        return f"`{exe} -I -m provision` would run {found}, not this provision ({here})"
    return None
