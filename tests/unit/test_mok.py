"""The ``mok-key`` fact follows the certificate DKMS is configured to sign with, and every consumer
names that certificate (DKMS README, "Module signing":
https://github.com/dell/dkms/blob/master/README.md#module-signing).

The probe script itself runs here, under ``dash``, against a fake root (its absolute paths rewritten
to a temporary directory) and a fake ``mokutil`` on ``PATH``, so that the framework-file reading
(last assignment wins, ``framework.conf.d`` after ``framework.conf``, quotes, comments,
``${kernelver}``) is tested as the target's shell runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from provision.catalog import load_catalog
from provision.detect.domains.driver import (
    _MOK_SCRIPT,
    DKMS_MOK,
    UBUNTU_MOK,
    ModuleSigner,
    MokState,
    parse_mok,
)
from provision.detect.facts import Facts
from provision.detect.raw import read_raw
from provision.detect.runner import facts_from_raw, unknown_facts
from provision.invariants.loaded import DriverLoaded
from provision.plan.models import Action, Component
from provision.plan.planner import make_plan
from provision.spec.loader import load_spec
from provision.verify.checks_driver import module_signer
from provision.verify.context import Context
from provision.verify.limits import shipped_limits
from provision.verify.runs import VerifyInputs
from tests.unit.factories import CATALOG, ROOT, fresh_ubuntu, spec, step
from tests.unit.test_field_failure_variants import FF_VARIANTS
from tests.unit.variants import materialize

FF11 = FF_VARIANTS / "ff11-shim-signed-mok-not-enrolled"
SYNTH_SECURE_BOOT = ROOT / "tests" / "fixtures" / "hardware" / "synth-2gpu-ff14"
MOKUTIL = (
    '#!/bin/sh\ncase "$2" in *enrolled-*) echo "SKIP: $2 is already enrolled";; '
    '*) echo "$2 is not enrolled";; esac\n'
)
"""mokutil --test-key's two verdicts (mokutil(1)): a certificate whose name has ``enrolled-`` is enrolled."""


# --- the parser ---------------------------------------------------------------------------------


def test_the_older_probes_output_stands_for_dkms_default_certificate() -> None:
    raw = read_raw(ROOT / "tests" / "fixtures" / "raw" / "h200-ubuntu2404-2026-12-03")["mok-key"]
    assert parse_mok(raw.output, raw.rc) == MokState(key_present=False, certificate=DKMS_MOK)
    old = "key present\nSKIP: /var/lib/dkms/mok.pub is already enrolled\n"
    assert parse_mok(old, 0) == MokState(key_present=True, enrolled=True, certificate=DKMS_MOK)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (  # mok_certificate= in framework.conf, not enrolled; no Ubuntu key
            "cert /etc/keys/dkms.der\ncert-source /etc/dkms/framework.conf\nkey present\n"
            "/etc/keys/dkms.der is not enrolled\n",
            MokState(
                key_present=True,
                enrolled=False,
                certificate="/etc/keys/dkms.der",
                configured_in="/etc/dkms/framework.conf",
            ),
        ),
        (  # a framework.conf.d file set it (the probe resolved the override), enrolled
            "cert /etc/keys/site key.der\ncert-source /etc/dkms/framework.conf.d/50-site.conf\nkey present\n"
            "SKIP: /etc/keys/site key.der is already enrolled\n",
            MokState(
                key_present=True,
                enrolled=True,
                certificate="/etc/keys/site key.der",
                configured_in="/etc/dkms/framework.conf.d/50-site.conf",
            ),
        ),
        (  # DKMS's default absent, Ubuntu's key enrolled
            f"cert {DKMS_MOK}\ncert-source default\nkey absent\ncert {UBUNTU_MOK}\ncert-source ubuntu\n"
            f"key present\nSKIP: {UBUNTU_MOK} is already enrolled\n",
            MokState(key_present=False, ubuntu_present=True, ubuntu_enrolled=True),
        ),
        (  # mokutil missing: present, enrollment unknown, for both keys
            f"cert {DKMS_MOK}\ncert-source default\nkey present\nsh: 1: mokutil: not found\n"
            f"cert {UBUNTU_MOK}\ncert-source ubuntu\nkey present\nsh: 1: mokutil: not found\n",
            MokState(key_present=True, enrolled=None, ubuntu_present=True, ubuntu_enrolled=None),
        ),
    ],
)
def test_the_parser_reads_each_tested_certificate(output: str, expected: MokState) -> None:
    assert parse_mok(output, 0) == expected


@pytest.mark.parametrize("output", ["", "cert /x\n", "garbage\x00\n", "cert \ncert-source\nkey"])
def test_unreadable_output_is_an_unknown_never_an_exception(output: str) -> None:
    assert parse_mok(output, 1).unknown.startswith("MOK state unreadable")  # type: ignore[union-attr]


def test_which_certificate_dkms_signs_with() -> None:
    ubuntu_default = MokState(key_present=False, ubuntu_present=True, ubuntu_enrolled=False)
    assert ubuntu_default.signing_certificate == UBUNTU_MOK and ubuntu_default.signing_enrolled is False
    configured = MokState(key_present=False, certificate="/k.der", configured_in="/etc/dkms/framework.conf")
    assert configured.model_copy(update={"ubuntu_present": True}).signing_certificate == "/k.der"
    assert MokState(key_present=False, ubuntu_enrolled=True).trusted == UBUNTU_MOK
    assert MokState(key_present=True, enrolled=False).trusted is None


# --- the probe script, run ----------------------------------------------------------------------


def _run_probe(root: Path) -> str:
    script = _MOK_SCRIPT.replace("/etc/dkms", f"{root}/etc/dkms").replace("/var/lib", f"{root}/var/lib")
    (root / "bin").mkdir(exist_ok=True)
    (root / "bin" / "mokutil").write_text(MOKUTIL)
    (root / "bin" / "mokutil").chmod(0o755)
    env = {**os.environ, "PATH": f"{root / 'bin'}:{os.environ['PATH']}"}
    shell = shutil.which("dash") or "/bin/sh"
    return subprocess.run([shell, "-c", script], capture_output=True, text=True, env=env, check=True).stdout


def _fake_root(tmp_path: Path) -> Path:
    for d in ("etc/dkms/framework.conf.d", "var/lib/dkms", "var/lib/shim-signed/mok", "keys"):
        (tmp_path / d).mkdir(parents=True)
    return tmp_path


def test_the_probe_takes_the_last_assignment_with_conf_d_after_framework_conf(tmp_path: Path) -> None:
    root = _fake_root(tmp_path)
    kernel = os.uname().release
    (root / "keys" / f"enrolled-{kernel}.der").write_text("cert")
    (root / "etc/dkms/framework.conf").write_text(
        f"# mok_certificate=/commented\nmok_certificate={root}/keys/first.der\n"
    )
    (root / "etc/dkms/framework.conf.d/10-site.conf").write_text(
        f'mok_certificate="{root}/keys/enrolled-${{kernelver}}.der"   # the site key\n'
    )
    (root / "etc/dkms/framework.conf.d/20-other.conf").write_text("sign_file=/usr/bin/true\n")
    parsed = parse_mok(_run_probe(root), 0)
    assert parsed == MokState(
        key_present=True,
        enrolled=True,
        certificate=f"{root}/keys/enrolled-{kernel}.der",
        configured_in=f"{root}/etc/dkms/framework.conf.d/10-site.conf",
    )


def test_the_probe_tests_dkms_default_and_ubuntus_key(tmp_path: Path) -> None:
    root = _fake_root(tmp_path)
    (root / "var/lib/shim-signed/mok/MOK.der").write_text("cert")
    out = _run_probe(root)
    assert f"cert {root}/var/lib/dkms/mok.pub\ncert-source default\nkey absent\n" in out
    assert f"cert {root}/var/lib/shim-signed/mok/MOK.der\ncert-source ubuntu\nkey present\n" in out


def test_a_path_from_the_target_is_never_run_by_the_probe(tmp_path: Path) -> None:
    root = _fake_root(tmp_path)
    marker = tmp_path / "ran"
    (root / "etc/dkms/framework.conf").write_text(f"mok_certificate=/x;touch {marker}\n")
    out = _run_probe(root)
    assert not marker.exists() and f"cert /x;touch {marker}\n" in out


# --- what the plan, the console steps and the invariant say -------------------------------------


def _secure_boot_facts(mok: MokState) -> Facts:
    facts = facts_from_raw(SYNTH_SECURE_BOOT)
    return facts.model_copy(update={"os": fresh_ubuntu().os, "packages": (), "mok": mok})


def test_the_manual_step_names_the_configured_certificate() -> None:
    mok = MokState(key_present=True, enrolled=False, certificate="/etc/keys/site.der", configured_in="/f")
    sb = step(make_plan(spec(), _secure_boot_facts(mok), CATALOG), Component.SECURE_BOOT)
    assert sb.action is Action.MANUAL and sb.current == "/etc/keys/site.der"
    assert "mokutil --import /etc/keys/site.der" in sb.reason and DKMS_MOK not in sb.reason


def test_an_enrolled_configured_certificate_needs_no_console_step() -> None:
    mok = MokState(key_present=True, enrolled=True, certificate="/etc/keys/site.der", configured_in="/f")
    sb = step(make_plan(spec(), _secure_boot_facts(mok), CATALOG), Component.SECURE_BOOT)
    assert (
        sb.action is Action.NOOP
        and sb.reason == "Secure Boot on; DKMS signing key /etc/keys/site.der is enrolled"
    )


def _driver_loaded(tmp_path: Path, mok: MokState) -> tuple[str, str, str]:
    facts = facts_from_raw(materialize(FF11, tmp_path)).model_copy(update={"mok": mok})
    verdict = DriverLoaded().judge(load_spec(FF11 / "spec.yaml"), facts, load_catalog())
    return verdict.status, verdict.cause, verdict.fix


@pytest.mark.parametrize(
    "mok",
    [
        MokState(key_present=True, enrolled=True, certificate="/etc/keys/site.der", configured_in="/f"),
        MokState(key_present=False, ubuntu_present=True, ubuntu_enrolled=True),
    ],
)
def test_the_invariant_does_not_blame_an_unenrolled_mok_when_one_is_enrolled(
    tmp_path: Path, mok: MokState
) -> None:
    status, cause, _ = _driver_loaded(tmp_path, mok)
    assert status != "violated" and "MOK" not in cause


def test_the_invariant_names_the_certificate_dkms_signs_with(tmp_path: Path) -> None:
    mok = MokState(key_present=False, ubuntu_present=True, ubuntu_enrolled=False)
    status, cause, fix = _driver_loaded(tmp_path, mok)
    assert status == "violated" and f"({UBUNTU_MOK} is not enrolled)" in cause
    assert f"`mokutil --import {UBUNTU_MOK}`, the certificate DKMS signs with" in fix


def test_facts_saved_before_the_certificate_field_still_load() -> None:
    old = MokState.model_validate_json('{"key_present": true, "enrolled": false}')
    assert old.certificate == DKMS_MOK and old.signing_certificate == DKMS_MOK and old.trusted is None


def test_verify_hint_names_the_certificate_dkms_signs_with() -> None:
    mok = MokState(key_present=True, enrolled=False, certificate="/etc/keys/site key.der", configured_in="/f")
    facts = _secure_boot_facts(mok).model_copy(update={"module_signer": ModuleSigner(signer="")})
    ctx = Context(
        spec=spec(driver__source="nvidia-repo"),
        inputs=VerifyInputs(facts=facts, gpu_run=unknown_facts("x", "y").gpus),
        catalog=CATALOG,
        limits=shipped_limits(),
    )  # type: ignore[arg-type]
    (row,) = module_signer(ctx)
    assert row.status == "fail" and "mokutil --import '/etc/keys/site key.der'" in (row.hint or "")
