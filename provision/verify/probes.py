"""The probe verify adds to detection: the fabric manager's version.

The fact itself (command and parser) is :class:`~provision.detect.domains.driver.FabricManagerVersionFact`,
run through detection's collector like every probe; the fabric state comes from detection's
``nvidia-smi -q`` (``facts.fabric``), parsed once there.
"""

from __future__ import annotations

from provision.detect.domains.driver import FabricManagerVersionFact
from provision.detect.fact import Probe, Unknown
from provision.detect.runner import run_probes

_FM = FabricManagerVersionFact
FM_PROBE = Probe(id=_FM.id, argv=_FM.argv, timeout=_FM.timeout)
"""``nv-fabricmanager --version``, run here (:func:`fm_version`) or beside detection on a host."""


def fm_version() -> str | Unknown:
    """The installed fabric manager's version, or why it is unknown."""
    out = run_probes([FM_PROBE])[FM_PROBE.id]
    return _FM.parse(out.output, out.rc)
