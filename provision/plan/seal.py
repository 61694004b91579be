"""The seal of a saved plan: a keyed digest over everything apply uses, so that apply takes only a
plan this user made, exactly as made.

``provision plan --out`` writes the plan with a :class:`Seal`: one SHA-256 per part apply reads
(the spec, the steps, the extravars, the facts fingerprint, the host, ...) and an HMAC-SHA256 over
all of them and the tool version, keyed by a secret only the sealing user can read
(:func:`seal_key`: ``/var/lib/provision/plan-seal.key`` for root, 0600, created on first use).
``provision apply plan.json`` recomputes the parts and names the ones that differ, and refuses a
plan whose HMAC its own key does not give: a plan another user made (from a copy of root's facts,
with a spec of theirs) cannot be applied by root, whatever its digests say. Plans of older
releases (a plain SHA-256 anyone can recompute) are refused: plan again. docs/security.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provision import __version__, trust
from provision.errors import DriftError, ProvisionError

if TYPE_CHECKING:
    from provision.plan.models import Plan

SCHEME = "hmac-sha256"
KEY_NAME = "plan-seal.key"
"""The seal key's file in :func:`state_dir`: 64 hex digits (256 random bits), mode 0600."""
STATE_DIR_VAR = "PROVISION_STATE_DIR"

SEALED_PARTS = (
    "format_version",
    "spec",
    "spec_path",
    "as_of",
    "host",
    "facts_fingerprint",
    "steps",
    "blockers",
    "warnings",
    "reboot_required",
    "extravars",
)
"""Every Plan field apply reads; a test keeps it equal to the Plan's fields less the seal."""


class PlanEditedError(ProvisionError):
    """A saved plan's content no longer matches its seal (or it has none)."""


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def part_digests(plan: Plan) -> dict[str, str]:
    """SHA-256 per sealed part of ``plan``, over its canonical JSON form."""
    data = plan.model_dump(mode="json")
    return {name: _digest(data[name]) for name in SEALED_PARTS}


def overall(parts: dict[str, str], tool_version: str, key: bytes) -> str:
    """The HMAC-SHA256 with ``key`` over the part digests and the tool version (RFC 2104)."""
    text = json.dumps({"parts": parts, "tool_version": tool_version}, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def key_id(key: bytes) -> str:
    """Which key: the first 16 hex digits of its SHA-256 (the key itself is never written)."""
    return hashlib.sha256(key).hexdigest()[:16]


def state_dir() -> Path:
    """``$PROVISION_STATE_DIR``, else ``/var/lib/provision`` for root, else the XDG state directory."""
    if env := os.environ.get(STATE_DIR_VAR):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/provision")
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "provision"


def seal_key(*, create: bool = False) -> bytes:
    """This user's seal key, read from :func:`state_dir` (created there, 0600, with ``create``).

    The file must pass the trust rule, be owned by this process's user and be readable by no
    one else: a key others could read would let them seal a plan.

    Raises:
        PlanEditedError: There is no key (and ``create`` is false), or it is not trusted, readable
            by others, or not a key.
    """
    path = state_dir() / KEY_NAME
    try:
        if create:
            _create_key(path)
        fd = trust.open_file(path)
    except trust.Missing:
        raise PlanEditedError(
            f"{path}: no plan seal key here, so no saved plan was made here by this user; make the plan "
            "here with `provision plan --out`"
        ) from None
    except trust.Untrusted as exc:
        raise PlanEditedError(f"{path}: the plan seal key is not trusted: {exc}") from None
    except OSError as exc:
        raise PlanEditedError(f"{path}: cannot read the plan seal key: {exc.strerror or exc}") from None
    try:
        info, text = os.fstat(fd), os.read(fd, 256)
    finally:
        os.close(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise PlanEditedError(
            f"{path}: the plan seal key must be owned by {trust.owner_text(os.geteuid())} and readable by "
            f"no one else (found {trust.owner_text(info.st_uid)}, mode {info.st_mode & 0o777:04o})"
        )
    key = text.strip()
    if len(key) != 64 or any(c not in b"0123456789abcdef" for c in key):
        raise PlanEditedError(f"{path}: not a plan seal key (64 hex digits)")
    return bytes.fromhex(key.decode())


def _create_key(path: Path) -> None:
    """Write a new key at ``path`` unless one is there (``O_EXCL``: two runs at once keep one key)."""
    directory = path.parent
    if not trust.check_path(directory, kind="dir", missing_ok=True):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = trust.open_directory(directory)
    try:
        with contextlib.suppress(FileExistsError):
            key = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
            with os.fdopen(key, "w") as handle:
                handle.write(secrets.token_hex(32) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
    finally:
        os.close(fd)


def edited_parts(plan: Plan) -> list[str]:
    """The parts of ``plan`` that differ from its seal, in :data:`SEALED_PARTS` order.

    ``seal`` means the seal itself was edited (or made with another key of the same id);
    ``tool version`` that another provision made it.

    Raises:
        PlanEditedError: The seal is an older release's (no key), or another key made it, or this
            user has no key (:func:`seal_key`).
    """
    if plan.seal is None:
        return ["seal (missing)"]
    if plan.seal.scheme != SCHEME:
        raise PlanEditedError(
            "the saved plan has an older release's seal (a plain SHA-256, which anyone could recompute); "
            "make it again with `provision plan --out`"
        )
    key = seal_key()
    if plan.seal.key_id != key_id(key):
        raise PlanEditedError(
            f"the saved plan was sealed with another key ({plan.seal.key_id or 'none'}, this user's is "
            f"{key_id(key)}): another user or another machine made it; make it here with "
            "`provision plan --out`"
        )
    found = part_digests(plan)
    changed = [name for name in SEALED_PARTS if plan.seal.parts.get(name) != found[name]]
    if plan.seal.tool_version != __version__:
        changed.append(f"tool version ({plan.seal.tool_version}, this is {__version__})")
    digest = overall(plan.seal.parts, plan.seal.tool_version, key)
    if not changed and not hmac.compare_digest(digest, plan.seal.digest):
        changed.append("seal")
    return changed


def check_seal(plan: Plan, where: str) -> None:
    """Refuse a saved plan edited after ``plan --out`` wrote it, or not sealed by this user's key.

    Raises:
        PlanEditedError: One line naming the changed parts, or why the seal is not this user's.
    """
    try:
        changed = edited_parts(plan)
    except PlanEditedError as exc:
        raise PlanEditedError(f"{where}: {exc}") from None
    if changed:
        raise PlanEditedError(
            f"{where}: the saved plan was changed after `provision plan --out` wrote it "
            f"(changed: {', '.join(changed)}); make it again with `provision plan --out`"
        )


def check_unchanged(saved: Plan, fresh: Plan) -> None:
    """Refuse to apply ``saved`` unless planning now gives the same plan: apply runs exactly it.

    Raises:
        DriftError: The plan was made from another host's facts (named: ``saved.host``, for a
            capture its directory's name), this host's facts changed, or another part of the plan did.
    """
    facts = f"facts {saved.facts_fingerprint[:12]} -> {fresh.facts_fingerprint[:12]}"
    if saved.host != fresh.host:
        # Made from another host's facts: a capture (`plan --from-raw DIR` records DIR's name), a
        # facts file, or another inventory host; saying "localhost changed" would name the wrong one.
        same = "same facts" if saved.facts_fingerprint == fresh.facts_fingerprint else facts
        raise DriftError(
            f"the plan was made from the facts of {saved.host}, not of {fresh.host} ({same}); "
            f"plan {fresh.host} itself with `provision plan` and apply that"
        )
    if saved.facts_fingerprint != fresh.facts_fingerprint:
        raise DriftError(
            f"the machine {fresh.host} changed since the plan was made ({facts}); run `provision plan` again"
        )
    before, now = part_digests(saved), part_digests(fresh)
    if differ := [name for name in SEALED_PARTS if before[name] != now[name]]:
        raise DriftError(
            f"planning {fresh.host} now gives another plan than the saved one "
            f"(differs: {', '.join(differ)}); run `provision plan` again"
        )


def sealed(plan: Plan) -> Plan:
    """``plan`` with its :class:`~provision.plan.models.Seal`, as ``plan --out`` saves it (this user's
    key created on first use: :func:`seal_key`)."""
    from provision.plan.models import Seal

    key = seal_key(create=True)
    parts = part_digests(plan)
    made = Seal(
        tool_version=__version__,
        parts=parts,
        digest=overall(parts, __version__, key),
        scheme=SCHEME,
        key_id=key_id(key),
    )
    return plan.model_copy(update={"seal": made})


def save(plan: Plan, path: Path) -> None:
    """Write ``plan``, sealed, to ``path`` as ``plan --out`` does, in every form of ``plan`` (one
    machine, an inventory, a fleet file), so that ``apply`` takes it exactly or refuses it.

    Raises:
        ProvisionError: The file cannot be written (:func:`provision.output.write_output`).
    """
    from provision.output import write_output

    write_output(path, sealed(plan).model_dump_json(indent=2))
