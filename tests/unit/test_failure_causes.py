"""Every failure line carries the cause (issue 13, item 6): apt's and dpkg's own words, in their
documented formats (apt-get(8), dpkg(1)), never the command line or a debconf notice."""

from __future__ import annotations

from provision.apply.runner import failure_cause
from provision.os.debian.apt import failure_cause as apt_cause

DEBCONF = "debconf: delaying package configuration, since apt-utils is not installed"
SCRIPT_FAILED = f"""{DEBCONF}
dpkg: error processing package nvidia-kernel-open-dkms (--configure):
 installed nvidia-kernel-open-dkms package post-installation script subprocess returned error exit status 10
Errors were encountered while processing:
 nvidia-kernel-open-dkms
E: Sub-process /usr/bin/dpkg returned an error code (1)
"""
HELD = """Some packages could not be installed. This may mean that you have
The following packages have unmet dependencies:
 nvidia-open : Depends: nvidia-driver-open (= 580.95.05-1) but 590.48.01-1 is to be installed
E: Unable to correct problems, you have held broken packages.
"""


def test_a_failing_maintainer_script_is_named_with_its_package() -> None:
    assert apt_cause(SCRIPT_FAILED) == (
        "the post-installation script of nvidia-kernel-open-dkms failed (exit status 10); fix what it "
        "needs, then run `dpkg --configure -a`; E: Sub-process /usr/bin/dpkg returned an error code (1)"
    )


def test_held_broken_packages_name_the_unmet_dependency() -> None:
    assert apt_cause(HELD) == (
        "unmet dependencies: nvidia-open : Depends: nvidia-driver-open (= 580.95.05-1) but 590.48.01-1 is "
        "to be installed; E: Unable to correct problems, you have held broken packages."
    )


def test_text_without_apt_errors_has_no_apt_cause() -> None:
    assert apt_cause(DEBCONF) is None
    assert apt_cause("") is None


def test_the_apt_modules_failure_line_drops_the_command_and_the_debconf_notice() -> None:
    res = {
        "msg": '\'/usr/bin/apt-get -y -o "Dpkg::Options::=--force-confdef" install '
        f"'nvidia-open=580.95.05-*'' failed: {DEBCONF}",
        "stderr": f"{DEBCONF}\nE: Sub-process /usr/bin/dpkg returned an error code (1)\n",
        "stdout": SCRIPT_FAILED,
        "rc": 100,
    }
    line = failure_cause(res)
    assert line.startswith("the post-installation script of nvidia-kernel-open-dkms failed")
    assert "debconf" not in line and "/usr/bin/apt-get -y" not in line


def test_a_roles_own_message_that_quotes_apt_is_kept() -> None:
    res = {
        "msg": "apt refused the NVIDIA repository http://x/repo: "
        "E: The repository 'http://x/repo ./ Release' is not signed."
    }
    assert failure_cause(res) == res["msg"]


def test_other_failures_keep_ansibles_message() -> None:
    assert failure_cause({"msg": "Could not find the requested service nvidia-fabricmanager"}) == (
        "Could not find the requested service nvidia-fabricmanager"
    )
