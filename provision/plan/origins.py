"""One source for the driver: where the installed NVIDIA driver packages came from (FF-08).

Mixing NVIDIA's repository with the distribution's archive (or a runfile) for the driver and
the fabric manager breaks version coherence: ``apt install cuda`` replaced a driver from
``ubuntu-drivers`` with NVIDIA's (FF-08, docs/field-failures.md#ff-08). Origins are hosts
(``host[:port]``) from the family's origins probe: ``apt-cache policy`` on Debian, dnf's
``from_repo`` and that repository's ``baseurl`` on the RHEL family (never its id: a mirror keeps
NVIDIA's id); ``local`` means only the package database knows the installed version. A package
whose origin was not read is absent, so it is never taken for another origin than the spec's.
These are warnings: no step removes or replaces a package because of its origin.
"""

from __future__ import annotations

from urllib.parse import urlparse

from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.fieldfailures import ff_ref
from provision.plan.models import Finding
from provision.spec.models import Spec

SOURCE = f"field failures FF-08 ({ff_ref(8)}): do not mix the distribution's and NVIDIA's driver packages"


def origin_findings(spec: Spec, facts: Facts, catalog: Catalog) -> tuple[Finding, ...]:
    """Warnings for driver packages from several origins, or from another origin than the spec's."""
    if isinstance(facts.origins, Unknown) or not facts.origins.origins:
        return ()
    by_origin: dict[str, list[str]] = {}
    for name, origin in sorted(facts.origins.origins.items()):
        by_origin.setdefault(origin, []).append(name)
    found: list[Finding] = []
    if len(by_origin) > 1:
        listing = "; ".join(f"{o}: {', '.join(names)}" for o, names in by_origin.items())
        found.append(
            _warn(
                "mixed-driver-sources",
                f"the driver's packages come from {len(by_origin)} origins "
                f"({listing}); keep them to one source",
            )
        )
    expected = _expected_host(spec, catalog)
    foreign = [n for o, names in by_origin.items() if o not in (expected, "local") for n in names]
    if spec.driver.source == "nvidia-repo" and expected and foreign:
        found.append(
            _warn(
                "driver-origin-not-spec",
                f"{', '.join(foreign)} come from another origin than "
                f"driver.source nvidia-repo ({expected}); apply moves them to NVIDIA's packages",
            )
        )
    return tuple(found)


def _expected_host(spec: Spec, catalog: Catalog) -> str | None:
    if spec.repository is not None:
        return urlparse(str(spec.repository.url)).netloc
    repo = catalog.repository(spec.os.repo_code, arch=spec.os.architecture)
    return urlparse(repo.url).netloc if repo else None


def _warn(rule: str, message: str) -> Finding:
    return Finding(rule=rule, severity="warning", message=message, source=SOURCE)
