"""pydantic's plugin lookup, answered without importing ``importlib.metadata`` while plugins are off.

pydantic asks ``pydantic.plugin._loader.get_plugins()`` for plugins when it builds its first
validator. That function returns no plugins when ``PYDANTIC_DISABLE_PLUGINS`` is ``__all__``,
``1`` or ``true`` (`pydantic: disabling plugins
<https://docs.pydantic.dev/latest/concepts/plugins/#disabling-plugins>`_; the console entry point
sets ``__all__`` unless the user chose), but its module imports ``importlib.metadata`` first (and
with it ``email``, ``zipfile`` and ``csv``): ~5 ms of every command on the 2-core build machine
(``benchmarks/bench_startup.py``), for an answer that is already known.

:func:`answer_while_off` registers, in place of that module, a stand-in whose ``get_plugins``
gives pydantic's own answer: none while the variable turns every plugin off, else the real
module's (loaded then, and put back in ``sys.modules``); any other name is the real module's.
With plugins on (the variable unset, empty or naming some plugins) nothing changes.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable
from typing import Any

LOADER = "pydantic.plugin._loader"
"""The module pydantic imports ``get_plugins`` from, inside the function that builds a validator
(pydantic 2.8 to 2.14: ``pydantic/plugin/_schema_validator.py``)."""

ALL_OFF = frozenset({"__all__", "1", "true"})
"""The values for which pydantic's ``get_plugins`` returns none before it scans anything."""


def plugins_off() -> bool:
    """Whether ``PYDANTIC_DISABLE_PLUGINS`` turns every plugin off, as pydantic reads it."""
    return os.environ.get("PYDANTIC_DISABLE_PLUGINS") in ALL_OFF


def answer_while_off() -> None:
    """Stand in for pydantic's plugin loader while plugins are off (see the module docstring); a
    no-op when they are on or when the loader is already imported."""
    if plugins_off() and LOADER not in sys.modules:
        sys.modules[LOADER] = _StandIn(LOADER)


class _StandIn(types.ModuleType):
    """``pydantic.plugin._loader`` until something needs more than "plugins are off"."""

    def get_plugins(self) -> Iterable[Any]:
        """None while plugins are off (pydantic's answer); else the real loader's."""
        return () if plugins_off() else _real().get_plugins()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system asks for __path__ and the like: not the real loader
            raise AttributeError(name)
        return getattr(_real(), name)


def _real() -> types.ModuleType:
    """The real loader, imported now in the stand-in's place (which it replaces in ``sys.modules``)."""
    import importlib

    if isinstance(sys.modules.get(LOADER), _StandIn):
        del sys.modules[LOADER]
    return importlib.import_module(LOADER)
