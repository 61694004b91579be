"""Services provision writes: the vLLM server's systemd unit file, read back so that a second apply
changes nothing when the unit on disk is the one the spec renders."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from provision.detect.fact import Derive, Fact, Unknown, failure, if_probed
from provision.models import Frozen
from provision.serving.unit import UNIT_PATH as VLLM_UNIT_PATH

MAX_UNIT_CHARS = 65536
"""A unit longer than this is not provision's (provision's is about 1 KiB)."""
_ABSENT = "=== absent"


class UnitFile(Frozen):
    """A unit file as read from disk.

    Attributes:
        present: The file exists.
        text: Its content (empty when absent).
    """

    present: bool
    text: str = Field("", max_length=MAX_UNIT_CHARS)


def parse_unit_file(output: str, rc: int) -> UnitFile | Unknown:
    """The probe's output -> the unit's text, ``present=False`` when the file does not exist."""
    if rc == 0 and output.rstrip("\n") == _ABSENT:
        return UnitFile(present=False)
    if (bad := failure("cat", output, rc)) is not None:
        return bad
    if len(output) > MAX_UNIT_CHARS:
        return Unknown(unknown=f"the unit file is larger than {MAX_UNIT_CHARS} characters (not provision's)")
    return UnitFile(present=True, text=output)


class VllmUnitFact(Fact[UnitFile]):
    """The vLLM server's unit file (``cat``; a marker line when the file is absent)."""

    id = "vllm-unit"
    argv = ("sh", "-c", f'if [ -e {VLLM_UNIT_PATH} ]; then cat {VLLM_UNIT_PATH}; else echo "{_ABSENT}"; fi')
    parse = staticmethod(parse_unit_file)


FACTS: tuple[type[Fact[Any]], ...] = (VllmUnitFact,)

FIELDS: dict[str, Derive] = {"vllm_unit": if_probed(VllmUnitFact)}
