"""Ctrl-C (SIGINT) as provision handles it, whatever disposition the process was started with.

A POSIX shell without job control starts a background job (``cmd &``, a CI step run in the
background) with SIGINT ignored, and Python then leaves it ignored: Ctrl-C and ``kill -INT`` would
do nothing outside an Ansible run and stop it inside one (where :mod:`provision.ansible` installs
its own handler), and a handler put back after the run would be the inherited ``SIG_IGN``.
provision's Ctrl-C is defined (the Ansible run's processes ended, ``Interrupted``, exit 130;
README "Exit codes"), so the console entry point and every Ansible run take Python's default
handler (``KeyboardInterrupt``) where SIGINT is ignored or at the OS default.
Source: https://docs.python.org/3/library/signal.html#signal.default_int_handler ("Python installs
a small number of signal handlers by default: SIGINT is translated into a KeyboardInterrupt
exception if the parent process has not changed it"); POSIX sh, "Asynchronous Lists" (SIGINT and
SIGQUIT ignored for a background command when job control is disabled).
"""

from __future__ import annotations

import signal
import threading


def own_sigint() -> None:
    """Install Python's default SIGINT handler where SIGINT is ignored or at the OS default; a
    handler of the program's own is kept. Only the main thread can set handlers: elsewhere nothing
    changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)
