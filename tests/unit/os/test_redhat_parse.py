"""provision.os.redhat.parse over outputs captured from real dnf 4.14 and rpm 4.18.

The fixtures in tests/fixtures/redhat/ were written by
``python3 -m tests.integration.harness.dnfroot capture tests/fixtures/redhat`` (see its
README); tests/integration/test_dnf_real.py checks the same parsers against live dnf and rpm.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from provision.os.redhat.parse import (
    RpmPackage,
    ansible_dnf_text,
    duplicates,
    evr_compare,
    failure_cause,
    parse_module_list,
    parse_rpm_qa,
    parse_versionlock_list,
    rpmvercmp,
    split_evr,
    split_lock,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "redhat"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# rpm's own cases (rpm's tests/rpmvercmp.at), re-checked against real rpm.vercmp by
# tests/integration/test_dnf_real.py::test_rpmvercmp_agrees_with_real_rpm.
VERCMP_CASES = [
    ("1.0", "1.0", 0), ("1.0", "2.0", -1), ("2.0", "1.0", 1), ("2.0.1", "2.0.1", 0), ("2.0", "2.0.1", -1),
    ("2.0.1a", "2.0.1", 1), ("5.5p1", "5.5p2", -1), ("5.5p10", "5.5p1", 1), ("10xyz", "10.1xyz", -1),
    ("xyz10", "xyz10.1", -1), ("xyz.4", "8", -1), ("8", "xyz.4", 1), ("5.6p1", "6.5p1", -1),
    ("6.0.rc1", "6.0", 1), ("10b2", "10a1", 1), ("1.0a", "1.0aa", -1), ("10.0001", "10.1", 0),
    ("10.0001", "10.0039", -1), ("4.999.9", "5.0", -1), ("20101121", "20101122", -1), ("2.0", "2_0", 0),
    ("a+", "a_", 0), ("+a", "_a", 0), ("_+", "+_", 0), ("+", "_", 0), ("1.0~rc1", "1.0", -1),
    ("1.0~rc1", "1.0~rc2", -1), ("1.0~rc1~git123", "1.0~rc1", -1), ("1.0^", "1.0", 1), ("1.0^git1", "1.0", 1),
    ("1.0^git1", "1.0^git2", -1), ("1.0^git1", "1.01", -1), ("1.0^20160101", "1.0.1", -1),
    ("1.0^20160102", "1.0^20160101^git1", 1), ("1.0~rc1^git1", "1.0~rc1", 1),
    ("1.0^git1~pre", "1.0^git1", -1),
    ("580.95.05", "580.82.07", 1), ("590.48.01", "580.95.05", 1), ("1.el9", "1.el10", -1),
    ("2.28.3", "2.28.10", -1), ("1+cuda13.0", "1+cuda12.9", 1), ("9.14.0.64", "9.9.9.9", 1),
]  # fmt: skip

EVR_CASES = [
    ("3:580.82.07-1.el9", "580.95.05-1.el9", 1),  # the epoch wins over any version
    ("0:1.0", "1.0", 0),
    ("1.0", "1.0-1", -1),  # a missing release is lower than any release
    ("1.0-", "1.0", 1),
    ("3:580.95.05-1.el9", "3:580.95.05-1.el9", 0),
    ("3:580.95.05-1.el9", "3:580.95.05-2.el9", -1),
    ("1:", "0", 1),
    ("a:b", "1", -1),  # "a" is no epoch: the whole string is the version
    ("10:1", "9:2", 1),
]


@pytest.mark.parametrize(("a", "b", "expected"), VERCMP_CASES)
def test_rpmvercmp_matches_rpm(a: str, b: str, expected: int) -> None:
    assert rpmvercmp(a, b) == expected
    assert rpmvercmp(b, a) == -expected


@pytest.mark.parametrize(("a", "b", "expected"), EVR_CASES)
def test_evr_compare_matches_rpm_vercmp(a: str, b: str, expected: int) -> None:
    assert evr_compare(a, b) == expected
    assert evr_compare(b, a) == -expected


def test_split_evr_shapes() -> None:
    assert split_evr("3:580.95.05-1.el9") == split_evr("3:580.95.05-1.el9")
    evr = split_evr("3:580.95.05-1.el9")
    assert (evr.epoch, evr.version, evr.release) == ("3", "580.95.05", "1.el9")
    bare = split_evr("13.0.2")
    assert (bare.epoch, bare.version, bare.release) == ("0", "13.0.2", None)


def test_rpm_qa_el9_capture() -> None:
    packages = parse_rpm_qa(fixture("rpm-qa-el9.txt"))
    by_name = {p.name: p for p in packages}
    assert "gpg-pubkey" not in by_name  # an imported key, not a package
    driver = by_name["nvidia-driver"]
    assert (driver.epoch, driver.version, driver.release, driver.arch) == (3, "580.95.05", "1.el9", "x86_64")
    assert driver.evr == "3:580.95.05-1.el9"
    assert driver.nevra == "nvidia-driver-3:580.95.05-1.el9.x86_64"
    assert driver.install_time > 1_700_000_000
    assert by_name["nvidia-kmod-common"].arch == "noarch"
    assert by_name["dkms"].evr == "3.2.1-1.el9"  # epoch 0 is not printed, as dnf does not
    assert len(packages) == 9


def test_rpm_qa_el10_capture_has_fabric_manager_without_epoch() -> None:
    by_name = {p.name: p for p in parse_rpm_qa(fixture("rpm-qa-el10.txt"))}
    assert by_name["nvidia-fabricmanager"].evr == "580.82.07-1"
    assert by_name["nvidia-open"].evr == "3:580.82.07-1.el10"


def test_rpm_qa_skips_malformed_lines_and_reads_five_fields() -> None:
    text = (
        "warning: Generating 12 missing index(es), please wait...\n"
        "3\tnvidia-driver\t580.95.05\t1.el9\tx86_64\n"
        "x\tbroken\t1\t1\tx86_64\t0\n"
        "0\tname with space\t1\t1\tx86_64\t0\n"
        "3\tnvidia-driver-libs\t580.95.05\t1.el9\n"
    )
    assert parse_rpm_qa(text) == (RpmPackage("nvidia-driver", 3, "580.95.05", "1.el9", "x86_64", 0),)


def test_duplicates_are_an_interrupted_transaction_but_kernels_are_not() -> None:
    text = (
        "3\tnvidia-driver\t580.82.07\t1.el9\tx86_64\t1\n3\tnvidia-driver\t580.95.05\t1.el9\tx86_64\t2\n"
        "0\tkernel-core\t5.14.0\t503.14.1.el9_5\tx86_64\t1\n0\tkernel-core\t5.14.0\t503.15.1.el9_5\tx86_64\t2\n"
        "0\tglibc\t2.34\t125.el9_5.1\tx86_64\t1\n0\tglibc\t2.34\t125.el9_5.1\ti686\t1\n"
    )
    assert duplicates(parse_rpm_qa(text)) == ("nvidia-driver",)
    assert duplicates(parse_rpm_qa(fixture("rpm-qa-el9.txt"))) == ()


def test_module_list_default_capture() -> None:
    rows = parse_module_list(fixture("dnf-module-list-default.txt"))
    assert [r.stream for r in rows] == [
        "latest-dkms", "open-dkms", "575-dkms", "575-open", "580-dkms", "580-open", "590-dkms", "590-open",
    ]  # fmt: skip
    latest = rows[0]
    assert latest.default and not latest.enabled and not latest.installed
    assert latest.profiles == ("default", "fm", "ks")
    assert latest.default_profiles == ("default",)
    assert latest.repo == "cuda-rhel9-x86_64"
    assert latest.summary == "Nvidia driver for latest-dkms branch"
    assert not any(r.default for r in rows[1:])


def test_module_list_enabled_installed_capture() -> None:
    rows = {r.stream: r for r in parse_module_list(fixture("dnf-module-list-enabled-installed.txt"))}
    open580 = rows["580-open"]
    assert open580.enabled and open580.installed and not open580.default
    assert open580.installed_profiles == ("default",)
    assert [s for s, r in rows.items() if r.enabled] == ["580-open"]


def test_module_list_disabled_capture() -> None:
    rows = parse_module_list(fixture("dnf-module-list-disabled.txt"))
    assert rows and all(r.disabled and not r.enabled for r in rows)
    assert rows[0].stream == "latest-dkms" and rows[0].default  # glued "[d][x]"


def test_module_list_public_layout_with_glued_flags_and_two_repos() -> None:
    # The layout of NVIDIA's repository as printed in public install notes (dnf 4, Fedora 39),
    # with a second repository listing the same module.
    text = (
        "Last metadata expiration check: 2:42:46 ago on Wed 17 Apr 2024 07:11:24 AM PDT.\n"
        "cuda-fedora39-x86_64\n"
        "Name                   Stream                      Profiles                           Summary\n"
        "nvidia-driver          latest                      default [d], fm, ks, src           "
        "Nvidia driver for latest branch\n"
        "nvidia-driver          latest-dkms [d][e]          default [d] [i], fm, ks            "
        "Nvidia driver for latest-dkms branch\n"
        "\n"
        "mirror\n"
        "Name          Stream    Profiles   Summary\n"
        "nvidia-driver 550-open  default    Nvidia driver for 550-open branch\n"
        "\n"
        "Hint: [d]efault, [e]nabled, [x]disabled, [i]nstalled\n"
    )
    rows = parse_module_list(text)
    assert [(r.repo, r.stream) for r in rows] == [
        ("cuda-fedora39-x86_64", "latest"), ("cuda-fedora39-x86_64", "latest-dkms"), ("mirror", "550-open"),
    ]  # fmt: skip
    assert rows[0].profiles == ("default", "fm", "ks", "src")
    dkms = rows[1]
    assert dkms.default and dkms.enabled and dkms.installed_profiles == ("default",)
    assert rows[2].profiles == ("default",) and rows[2].summary == "Nvidia driver for 550-open branch"


def test_module_list_of_an_error_has_no_rows() -> None:
    assert parse_module_list(fixture("dnf-module-enable-other-major.txt")) == ()


def test_versionlock_list_capture() -> None:
    entries = parse_versionlock_list(fixture("dnf-versionlock-list.txt"))
    assert len(entries) == 8
    assert "nvidia-driver-3:580.82.07-1.el10.*" in entries
    assert not any("metadata" in e for e in entries)
    assert parse_versionlock_list(fixture("versionlock.list")) and set(
        parse_versionlock_list(fixture("versionlock.list"))
    ) == set(entries)


def test_versionlock_list_keeps_exclude_entries_and_skips_prose() -> None:
    text = (
        "# Added lock on Thu\n!nvidia-driver-3:590.48.01-1.el10.*\n\n"
        "Adding versionlock on: x-1:1-1.*\nfoo-0:1-1.*\n"
    )
    assert parse_versionlock_list(text) == ("!nvidia-driver-3:590.48.01-1.el10.*", "foo-0:1-1.*")


def test_split_lock() -> None:
    assert split_lock("nvidia-driver-cuda-libs-3:580.82.07-1.el10.*") == (
        "nvidia-driver-cuda-libs",
        "3:580.82.07-1.el10",
    )
    assert split_lock("libnccl-0:2.28.3-1+cuda13.0.x86_64") == ("libnccl", "0:2.28.3-1+cuda13.0")
    assert split_lock("!nvidia-driver-3:590.48.01-1.el10.*") is None
    assert split_lock("nvidia-driver") is None


CAUSES = {
    "dnf-filtered-modular-other-major.txt": ("platform:el9", "this host's own major release", "rhel9"),
    "dnf-module-enable-other-major.txt": ("platform:el9", "own major release"),
    "dnf-filtered-modular-other-stream.txt": ("nvidia-driver-3:590.48.01", "not enabled", "module enable"),
    "dnf-module-enable-other-stream.txt": ("580-open", "switch-to nvidia-driver:590-open --allowerasing"),
    "dnf-no-match.txt": ("nvidia-driver-9999", "no enabled repository"),
    "dnf-conflicts-other-flavour.txt": ("conflicts with cuda-drivers", "--allowerasing", "switch-to"),
    "dnf-nothing-provides.txt": ("dkms", "EPEL", "kmod-nvidia-open-dkms"),
    "dnf-versionlock-excluded.txt": ("nvidia-open-3:580.95.05", "versionlock"),
    "dnf-versionlock-requires.txt": (
        "nvidia-driver-cuda-libs-3:580.95.05",
        "needed by nvidia-driver-cuda",
        "lock",
    ),
    "dnf-gpg-unsigned.txt": ("is not signed", "D42D0685"),
    "dnf-gpg-wrong-key.txt": ("not the repository's configured gpgkey", "D42D0685"),
    "dnf-gpg-no-key.txt": ("no GPG key", "gpgkey"),
    "dnf-repo-down.txt": ("cuda-rhel10-x86_64", "metadata"),
    "dnf-repo-bad-metadata-signature.txt": (
        "metadata of provision-nvidia-container-toolkit does not verify with its gpgkey",
        "Bad GPG signature",
    ),
}


@pytest.mark.parametrize("name", sorted(CAUSES))
def test_failure_cause_of_each_real_dnf_error(name: str) -> None:
    cause = failure_cause(fixture(name))
    assert cause is not None
    assert "\n" not in cause
    for fragment in CAUSES[name]:
        assert fragment in cause


def test_every_error_fixture_has_a_cause_case() -> None:
    errors = {p.name for p in FIXTURES.glob("dnf-*.txt") if "list" not in p.name}
    assert errors == set(CAUSES)


@pytest.mark.parametrize(
    "name", ["dnf-module-list-default.txt", "dnf-versionlock-list.txt", "rpm-qa-el9.txt"]
)
def test_no_cause_in_successful_output(name: str) -> None:
    assert failure_cause(fixture(name)) is None


ANSIBLE_CAUSES = {
    "ansible-dnf-filtered-other-stream.json": ("nvidia-driver-3:590.48.01", "not enabled", "module enable"),
    # ansible.builtin.dnf drops dnf's platform warning: the cause names both readings.
    "ansible-dnf-other-major.json": ("nvidia-open", "another EL major release", "own major release"),
    "ansible-dnf-module-other-major.json": ("platform:el9", "own major release"),
    "ansible-dnf-no-match.json": ("nvidia-driver-9999", "no enabled repository"),
    "ansible-dnf-nothing-provides.json": ("dkms", "EPEL"),
    "ansible-dnf-versionlock-excluded.json": ("nvidia-open-3:580.95.05", "version lock"),
    "ansible-dnf-gpg-wrong-key.json": ("not the repository's configured gpgkey",),
    "ansible-dnf-gpg-key-unreachable.json": ("missing.pub", "HTTP status 404"),
    "ansible-dnf-repo-down.json": ("cuda-rhel9-x86_64", "metadata"),
}


@pytest.mark.parametrize("name", sorted(ANSIBLE_CAUSES))
def test_failure_cause_of_each_ansible_dnf_result(name: str) -> None:
    cause = failure_cause(ansible_dnf_text(json.loads(fixture(name))))
    assert cause is not None and "\n" not in cause
    for fragment in ANSIBLE_CAUSES[name]:
        assert fragment in cause


def test_every_ansible_fixture_has_a_case() -> None:
    found = {p.name for p in FIXTURES.glob("ansible-dnf-*.json")}
    assert found == set(ANSIBLE_CAUSES) | {"ansible-dnf-module-other-stream.json"}


def test_ansible_dnf_switches_an_enabled_stream_without_refusing() -> None:
    # Measured: with 580-open enabled (nothing installed), ansible.builtin.dnf given
    # "@nvidia-driver:590-open/default" installs branch 590 and succeeds, where the dnf CLI's
    # `module enable` refuses (dnf-module-enable-other-stream.txt). The branch is the planner's
    # decision; the role cannot count on dnf to refuse a change of stream.
    result = json.loads(fixture("ansible-dnf-module-other-stream.json"))
    assert result["rc"] == 0 and failure_cause(ansible_dnf_text(result)) is None
    assert "Installed: nvidia-driver-3:590.48.01-1.el9.x86_64" in result["results"]


def test_ansible_dnf_text_ignores_what_is_not_text() -> None:
    assert ansible_dnf_text(None) == ""
    assert ansible_dnf_text({"msg": 3, "failures": ["a", 4], "results": "b"}) == "a\nb"


def test_locklist_not_set_cause() -> None:
    cause = failure_cause("Error: Locklist not set\n")
    assert cause is not None and "locklist=" in cause


# --- properties ---------------------------------------------------------------------------

SEGMENT = st.text(alphabet="0123456789abZ.~^_+-:", max_size=12)
SAMPLES = [p.read_text() for p in sorted(FIXTURES.glob("*.txt"))] + [fixture("versionlock.list")]
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@seed(28)
@PROPERTY
@given(SEGMENT, SEGMENT)
def test_rpmvercmp_antisymmetric_and_reflexive(a: str, b: str) -> None:
    assert rpmvercmp(a, b) == -rpmvercmp(b, a)
    assert rpmvercmp(a, a) == 0
    assert evr_compare(a, b) == -evr_compare(b, a)


@seed(28)
@PROPERTY
@given(SEGMENT, SEGMENT, SEGMENT)
def test_rpmvercmp_transitive(a: str, b: str, c: str) -> None:
    for cmp in (rpmvercmp, evr_compare):
        x, y, z = sorted((a, b, c), key=functools.cmp_to_key(cmp))
        assert cmp(x, y) <= 0 and cmp(y, z) <= 0
        assert cmp(x, z) <= 0


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SAMPLES))
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, len(text)))
        text = (
            text[:i]
            + draw(st.sampled_from(["[d]", "[i],", "\t", "\n", ":", "-", "~", "9" * 300, ""]))
            + text[j:]
        )
    return text + draw(st.text(max_size=30))


@seed(28)
@PROPERTY
@given(mutated())
def test_parsers_never_raise(text: str) -> None:
    parse_rpm_qa(text)
    parse_module_list(text)
    parse_versionlock_list(text)
    for entry in parse_versionlock_list(text):
        split_lock(entry)
    cause = failure_cause(text)
    assert cause is None or ("\n" not in cause and len(cause) <= 800)


@pytest.mark.parametrize("size", [200_000, 4_000_000])
def test_parsers_are_bounded_on_huge_input(size: int) -> None:
    text = ("[d] " * (size // 4)) + "\n" + ("9" * size) + "\nPackage " + "x" * size + " is not signed\n"
    started = time.process_time()
    parse_rpm_qa(text)
    parse_module_list(text)
    parse_versionlock_list(text)
    failure_cause(text)
    rpmvercmp("9" * size, "9" * (size - 1))
    assert time.process_time() - started < 5.0
