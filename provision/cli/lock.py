"""``provision lock``: the lock of what the last converged apply left on each host."""

from __future__ import annotations

import typer

from provision.cli.base import (
    InvOpt,
    JsonOpt,
    LimitOpt,
    _emit_json,
    cli,
    out,
    user_errors,
)

lock_cli = typer.Typer(
    name="lock", help="The lock of what the last converged apply left on each host.", no_args_is_help=True
)
cli.add_typer(lock_cli)


@lock_cli.command("show")
@user_errors()
def lock_show(*, as_json: JsonOpt = False, inventory: InvOpt = None, limit: LimitOpt = None) -> None:
    """Print each host's current lock and its numbered history (/var/lib/provision on the host).

    A lock holds the exact versions and holds of the managed packages, the venv's wheels and their
    hashes, the repository key, the spec and its digest, and verify's result when it ran.
    """
    from provision.lock.show import lock_json, render_locks
    from provision.lock.store import read_locks

    found = read_locks(inventory, limit)
    if as_json:
        _emit_json(lock_json(found))
    else:
        render_locks(found, out)
