"""The resume record: what ``provision resume`` finishes after a reboot, and the rules for trusting it.

``apply --reboot`` writes it when a host must boot before the apply can finish: on this machine
(``/var/lib/provision/resume.json``, run by the one-shot unit of :mod:`provision.reboot.unit`)
and, for remote hosts waiting on a console step (MOK enrollment), in the run directory on the
controller. It names the spec file and that file's SHA-256 (a spec edited since is refused, not
resumed), the inventory (None: this machine), the hosts, the components whose changes the user
consented to (the resume applies nothing else unattended), the hosts whose MOK enrollment is
pending, and where logs and runs go. A SHA-256 over all of it (``digest``) refuses a record edited
by hand or cut short.

Trust: the resume runs as root from a boot-time unit, so a record, spec or run directory that the
trust rule refuses (:mod:`provision.trust`) is refused; the record itself must be root's (at boot
the invoking user is root), and it names the user who ran the apply (``invoking_uid``), whom the
resume then trusts as that apply did (:func:`act_for`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from provision import trust
from provision.errors import ProvisionError, first_error
from provision.files import read_bytes, read_json_text, untrusted_message
from provision.models import Frozen

RESUME_FILE = Path("/var/lib/provision/resume.json")
"""This machine's record: read by ``provision-resume.service`` at boot (ConditionPathExists)."""

RECORD_NAME = "resume.json"
"""The record's name in a run directory (remote hosts waiting on a console step)."""

LOG_NAME = "resume.log"
"""The resume's log, in the run directory of the apply that wrote the record."""


class ResumeError(ProvisionError):
    """The resume record is missing, not trusted, edited, or no longer matches its spec."""


class ResumeRecord(Frozen):
    """What is left to do after a reboot (see the module docstring).

    Attributes:
        created_at: When apply wrote it (UTC, ISO 8601).
        spec_path: The spec file or saved plan apply ran (absolute).
        spec_sha256: SHA-256 of that file's bytes at apply time.
        inventory: The Ansible inventory (absolute); None for this machine.
        hosts: Inventory hostnames to resume (``localhost`` for this machine).
        consented: Components whose changes the confirmed plan held; the resume applies no other.
        mok_pending: Hosts that wait for MOK enrollment at the console.
        run_dir: The apply's run directory (the resume's log goes there).
        runs_dir: Where the resume's own run directory goes.
        invoking_uid: The invoking user of the apply (:func:`provision.trust.invoking_uid`; 0 in
            records of older releases): the resume trusts what that user owns, as the apply did.
        digest: SHA-256 over every other field (:func:`digest_of`).
    """

    format_version: Literal[1] = 1
    created_at: str
    spec_path: str
    spec_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    inventory: str | None = None
    hosts: tuple[str, ...] = Field(min_length=1)
    consented: tuple[str, ...] = ()
    mok_pending: tuple[str, ...] = ()
    run_dir: str
    runs_dir: str
    invoking_uid: int = Field(0, ge=0, lt=2**32)
    digest: str = ""

    @property
    def log(self) -> Path:
        """The resume's log file, ``<run_dir>/resume.log``."""
        return Path(self.run_dir) / LOG_NAME


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of the file's bytes.

    Raises:
        ResumeError: The file is missing or not a regular file.
    """
    return hashlib.sha256(read_bytes(path, what="spec", error=ResumeError)).hexdigest()


def digest_of(record: ResumeRecord) -> str:
    """SHA-256 over the record's fields except ``digest``, as canonical JSON (sorted keys)."""
    body = record.model_dump(mode="json", exclude={"digest"})
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def new_record(
    spec_path: Path,
    *,
    inventory: Path | None,
    hosts: list[str],
    consented: list[str],
    mok_pending: list[str],
    run_dir: Path,
    runs_dir: Path,
) -> ResumeRecord:
    """A sealed record for ``hosts`` (see :class:`ResumeRecord`).

    Raises:
        ResumeError: The spec file cannot be read.
    """
    spec = spec_path.resolve()
    record = ResumeRecord(
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        spec_path=str(spec),
        spec_sha256=file_sha256(spec),
        inventory=str(inventory.resolve()) if inventory is not None else None,
        hosts=tuple(hosts),
        consented=tuple(dict.fromkeys(consented)),
        mok_pending=tuple(mok_pending),
        run_dir=str(run_dir.resolve()),
        runs_dir=str(runs_dir.resolve()),
        invoking_uid=trust.invoking_uid(),
    )
    return record.model_copy(update={"digest": digest_of(record)})


def write_record(record: ResumeRecord, path: Path) -> None:
    """Write ``record`` to ``path`` atomically, mode 0600 (its directory made 0755 if missing)."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".resume-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(record.model_dump_json(indent=2) + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_record(path: Path) -> ResumeRecord:
    """The record at ``path``, once it is trusted and intact.

    Raises:
        ResumeError: No record; a user other than its reader (or root) could have written it;
            not a resume record; its digest differs (edited by hand or cut short).
    """
    if not path.exists():
        raise ResumeError(f"{path}: no resume record (nothing is waiting for a reboot)")
    refuse_untrusted(path, "the resume record")
    text = read_json_text(path, what="resume record", error=ResumeError, label="provision resume record")
    try:
        record = ResumeRecord.model_validate_json(text)
    except ValidationError as exc:
        raise ResumeError(f"{path}: not a provision resume record ({first_error(exc)})") from None
    if record.digest != digest_of(record):
        raise ResumeError(
            f"{path}: the record was changed after apply wrote it (digest differs); nothing was run"
        )
    return record


def refuse_untrusted(path: Path, what: str) -> None:
    """Refuse ``path`` unless the trust rule accepts it (:mod:`provision.trust`).

    Raises:
        ResumeError: One line naming the part that failed and its owner; nothing was run.
    """
    try:
        trust.check_path(path, kind="file")
    except trust.Untrusted as exc:
        raise ResumeError(f"{untrusted_message(path, exc, what)}; nothing was run") from None
    except OSError as exc:
        raise ResumeError(f"{path}: cannot be checked ({exc.strerror or exc}); nothing was run") from None


def act_for(record: ResumeRecord) -> None:
    """Trust, from now on in this process and what it starts, what the record's apply trusted: run
    as root (the boot-time unit), ``SUDO_UID`` is set to the apply's invoking user
    (:func:`provision.trust.invoking_uid` reads it), so that a venv or spec under that user's home
    is accepted at boot as it was by ``sudo provision apply``."""
    if record.invoking_uid and os.getuid() == 0 and os.geteuid() == 0:
        os.environ[trust.SUDO_VAR] = str(record.invoking_uid)


def check_spec(record: ResumeRecord) -> Path:
    """The record's spec file, unchanged since apply and trusted; returns its path.

    Raises:
        ResumeError: The file is gone, changed, or refused by the trust rule.
    """
    spec = Path(record.spec_path)
    refuse_untrusted(spec, "the spec file")
    if file_sha256(spec) != record.spec_sha256:
        raise ResumeError(
            f"{spec} changed since apply wrote the resume record; nothing was run: review it and run "
            "`provision apply` again"
        )
    return spec


def remove_record(path: Path) -> None:
    """Remove the record (a missing one is fine: the resume is done either way)."""
    path.unlink(missing_ok=True)
