"""Each OS family's release facts live behind one interface (``provision/os/<family>/releases.py``,
:class:`provision.os.base.FamilyReleases`), and agree with the catalog that names the same releases."""

from __future__ import annotations

import pytest

from provision.catalog import load_catalog
from provision.os import release, releases, repo_code, same_release
from provision.os.debian import releases as debian
from provision.os.redhat import releases as redhat
from provision.os.select import FAMILY_OF_ID, RELEASES
from provision.spec.models import OsSpec


@pytest.mark.parametrize(
    ("distro", "version", "code"),
    [
        ("ubuntu", "24.04", "ubuntu2404"),
        ("ubuntu", "22.04", "ubuntu2204"),
        ("debian", "12", "debian12"),
        ("ubuntu", "26.04", "ubuntu2604"),  # not listed: the code still follows NVIDIA's naming
        ("ubuntu", "20.04", "ubuntu2004"),
        ("rocky", "9.5", "rhel9"),
        ("rhel", "10", "rhel10"),
    ],
)
def test_repository_codes(distro: str, version: str, code: str) -> None:
    assert repo_code(distro, version) == code
    assert OsSpec(distro=distro, version=version).repo_code == code  # type: ignore[arg-type]


def test_every_listed_release_is_served_by_nvidia_and_named_as_the_catalog_names_its_archive() -> None:
    cat = load_catalog()
    for rel in debian.RELEASES.values():
        assert rel.repo_code in cat.repo_distros, rel
        archive = cat.distro_archives.get(rel.repo_code)
        assert archive is None or archive.series == rel.series, rel
    for rhel in redhat.RELEASES.values():
        assert rhel.repo_code in cat.repo_distros, rhel


def test_both_families_carry_the_same_release_facts() -> None:
    noble, rocky9 = release("ubuntu", "24.04"), release("rocky", "9.5")
    assert noble is not None and rocky9 is not None
    assert (noble.repo_code, noble.kernel_series, noble.interpreters) == ("ubuntu2404", "6.8", ("3.12",))
    assert (rocky9.repo_code, rocky9.kernel_series) == ("rhel9", "5.14") and "3.12" in rocky9.interpreters
    assert release("ubuntu", "20.04") is None and release("rocky", "8") is None


def test_every_spec_distro_has_its_familys_releases() -> None:
    families = {FAMILY_OF_ID[d] for d in (*debian.DISTROS, *redhat.DISTROS)}
    assert families == set(RELEASES)
    assert releases("ubuntu") is debian.FACTS and releases("rocky") is redhat.FACTS


def test_the_release_matches_exactly_on_debian_and_by_major_on_rhel() -> None:
    assert same_release("ubuntu", "24.04", "24.04") and not same_release("ubuntu", "24", "24.04")
    assert same_release("rocky", "9", "9.5") and not same_release("rocky", "9.4", "9.5")


def test_debian_accepts_any_release_in_the_spec_and_adds_nothing_to_a_mismatch() -> None:
    assert OsSpec(distro="ubuntu", version="20.04").version == "20.04"
    assert debian.FACTS.unsupported("debian", "11", "aarch64") is None
    assert debian.FACTS.wrong_release("ubuntu2404", "ubuntu2204") is None
    note = redhat.FACTS.wrong_release("rhel9", "rhel10")
    assert note is not None and "own rhel10" in note[0] and "modularity" in note[1]
    # Another family's repository is no dnf repository: the distributions' mismatch says it all.
    assert redhat.FACTS.wrong_release("ubuntu2404", "rhel9") is None
