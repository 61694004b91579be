"""The command line (``provision.cli:main``): one module per command group, sharing :mod:`.base`.

:mod:`.base` holds the typer app, the consoles, the shared options, the error policy
(:func:`~provision.cli.base.user_errors`) and the entry point; each command module registers its
commands on import, and imports what its commands use inside their functions, so that start-up
(``--version``, ``validate``) loads no more than the command run needs
(``benchmarks/bench_startup.py``).
"""

# isort: off
# Registration order is the order `provision --help` lists the commands in.
from provision.cli import spec, machine, plan, apply, checklist, verify, lock

# isort: on
from provision.cli.base import (
    _start_probes,
    cli,
    console,
    err,
    invoked_only,
    main,
    out,
    start_up,
    user_errors,
)

__all__ = [
    "_start_probes",
    "apply",
    "checklist",
    "cli",
    "console",
    "err",
    "invoked_only",
    "lock",
    "machine",
    "main",
    "out",
    "plan",
    "spec",
    "start_up",
    "user_errors",
    "verify",
]
