"""The stand-in for pydantic's plugin loader gives pydantic's own answers (provision/pydanticplugins.py)."""

from __future__ import annotations

import sys
import types

import pytest

from provision import pydanticplugins
from provision.pydanticplugins import LOADER


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """No plugin loader imported yet (the real one put back afterwards, in ``sys.modules`` and as
    its package's attribute, which a second import of the real loader replaces)."""
    import pydantic.plugin
    import pydantic.plugin._loader as loader

    monkeypatch.setattr(pydantic.plugin, "_loader", loader)
    monkeypatch.delitem(sys.modules, LOADER)


@pytest.mark.usefixtures("fresh")
def test_no_plugins_while_off_and_the_real_loader_once_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "true")
    pydanticplugins.answer_while_off()
    stand_in = sys.modules[LOADER]
    assert tuple(stand_in.get_plugins()) == ()
    assert sys.modules[LOADER] is stand_in  # answered without the real loader
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "")
    answer = list(stand_in.get_plugins())
    real = sys.modules[LOADER]
    assert real is not stand_in and type(real) is types.ModuleType  # the real one, imported now
    assert real.__file__ is not None and real.__file__.endswith("_loader.py")
    assert answer == list(real.get_plugins())
    assert stand_in.PYDANTIC_ENTRY_POINT_GROUP == real.PYDANTIC_ENTRY_POINT_GROUP == "pydantic"


@pytest.mark.usefixtures("fresh")
def test_other_names_are_the_real_loaders_but_import_dunders_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    pydanticplugins.answer_while_off()
    stand_in = sys.modules[LOADER]
    assert not hasattr(stand_in, "__path__")  # the import system asks; the real loader stays unloaded
    assert sys.modules[LOADER] is stand_in
    assert stand_in.PYDANTIC_ENTRY_POINT_GROUP == "pydantic"
    assert sys.modules[LOADER] is not stand_in


@pytest.mark.parametrize("value", [None, "", "logfire,other"])
@pytest.mark.usefixtures("fresh")
def test_nothing_stands_in_while_plugins_are_on(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    else:
        monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", value)
    pydanticplugins.answer_while_off()
    assert LOADER not in sys.modules


def test_an_imported_loader_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import pydantic.plugin._loader  # noqa: F401

    loader = sys.modules[LOADER]
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    pydanticplugins.answer_while_off()
    assert sys.modules[LOADER] is loader
