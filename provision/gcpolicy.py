"""When the cyclic garbage collector runs in a command: not while it starts up, not at exit.

Measured (``benchmarks/bench_startup.py``): a command's start-up allocates hundreds of thousands
of objects that live until exit (modules, pydantic's validators and schemas, the catalog), so
every full collection during start-up walks them all for nothing, and at exit the interpreter's
final collections walk them once more: ~0.05-0.1 s of a ``validate`` or ``plan --from-raw`` on
the 2-core build machine. Python's documented levers (https://docs.python.org/3/library/gc.html):

- :func:`start_up`: ``gc.disable()`` for the command's own work (reference counting still frees
  everything that is not in a cycle);
- :func:`long_running`: before work that runs for long (an Ansible play, verify's GPU loads),
  ``gc.freeze()`` moves everything allocated so far to the permanent generation, then
  ``gc.enable()``: collections resume and cost only what the long work allocates;
- :func:`exiting`: ``gc.freeze()``, so the interpreter's final collections skip the lot.

Only the console entry point (:func:`provision.cli.main`) calls :func:`start_up`; code that
imports provision as a library (the tests) keeps the collector as it is.
"""

from __future__ import annotations

import gc


def start_up() -> None:
    """No cyclic collection while the command starts up and runs its short work."""
    gc.disable()


def long_running() -> None:
    """Collect again, but only what is allocated from now on (no-op unless :func:`start_up` ran)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def exiting() -> None:
    """Let the interpreter's final collections skip everything the command allocated."""
    gc.freeze()
