"""Trust boundaries: nothing a non-root user could write is run as root (docs/security.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from provision.detect.domains.python import TorchFact, VenvFact, parse_torch
from provision.detect.fact import Unknown
from provision.spec.models import PythonSpec
from provision.trust import untrusted_reason
from provision.verify.launch import python_of

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="ownership checks need files owned by root and by others")


def _planted_venv(root: Path) -> tuple[Path, Path]:
    """A venv whose bin/python, if run, leaves a marker file: what an attacker would plant."""
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    marker = root / "ran"
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\ntouch {marker}\necho torch 9.9.9\n")
    python.chmod(0o755)
    site = venv / "lib" / "python3.12" / "site-packages" / "torch"
    site.mkdir(parents=True)
    (site / "version.py").write_text("__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.12.3\n")
    return venv, marker


def test_venv_probes_never_run_a_file_in_the_venv(tmp_path: Path) -> None:
    venv, marker = _planted_venv(tmp_path)
    for fact in (TorchFact, VenvFact):
        argv = fact.command(str(venv))
        assert argv[0] == "sh" and not any(a.startswith(str(venv) + "/") for a in argv), fact.id
        subprocess.run(argv, capture_output=True, check=False, timeout=10)
    assert not marker.exists()


def test_torch_probe_reads_version_py_and_pyvenv_cfg(tmp_path: Path) -> None:
    venv, _ = _planted_venv(tmp_path)
    out = subprocess.run(TorchFact.command(str(venv)), capture_output=True, text=True, timeout=10)
    torch = parse_torch(out.stdout, out.returncode)
    assert not isinstance(torch, Unknown), out.stdout
    assert (torch.venv, torch.version, torch.cuda, torch.python) == (
        str(venv),
        "2.11.0+cu130",
        "13.0",
        "3.12.3",
    )


def test_torch_probe_reads_a_bounded_prefix_of_a_device(tmp_path: Path) -> None:
    venv, _ = _planted_venv(tmp_path)
    version_py = next(venv.glob("lib/*/site-packages/torch/version.py"))
    version_py.unlink()
    version_py.symlink_to("/dev/zero")
    out = subprocess.run(TorchFact.command(str(venv)), capture_output=True, text=True, timeout=10)
    assert len(out.stdout) < 1000


def test_torch_probe_on_a_missing_venv_names_it(tmp_path: Path) -> None:
    out = subprocess.run(
        TorchFact.command(str(tmp_path / "none")), capture_output=True, text=True, timeout=10
    )
    assert parse_torch(out.stdout, out.returncode) == Unknown(
        unknown=f"torch: no virtual environment at {tmp_path / 'none'}"
    )


@pytest.mark.parametrize(
    "venv", ["/", "/etc", "/usr", "/usr/local/venv", "/proc/self", "/tmp/venv", "/opt", "/srv", "/home/u/v"]
)
def test_system_and_shared_directories_are_refused_for_the_venv(venv: str) -> None:
    with pytest.raises(ValidationError, match=r"must be a directory under /opt/ or /srv/"):
        PythonSpec(interpreter="3.12", venv=venv)  # type: ignore[arg-type]


@pytest.mark.parametrize("venv", ["/opt/venv", "/opt/torch/.venv", "/srv/ml/env"])
def test_venvs_under_opt_and_srv_are_accepted(venv: str) -> None:
    assert PythonSpec(interpreter="3.12", venv=venv).venv == venv  # type: ignore[arg-type]


@needs_root
def test_a_root_owned_path_is_trusted(tmp_path: Path) -> None:
    # tmp_path sits under /tmp (sticky, mode 1777): others cannot replace the root-owned entry in it.
    tmp_path.chmod(0o755)
    (tmp_path / "python").write_text("")
    assert untrusted_reason(tmp_path / "python") is None


@needs_root
def test_a_file_owned_by_another_user_is_untrusted(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    python = tmp_path / "python"
    python.write_text("")
    os.chown(python, 1000, 1000)
    assert untrusted_reason(python) == f"{python} is owned by uid 1000, not root"


@needs_root
def test_a_directory_others_may_write_makes_everything_below_untrusted(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "venv" / "bin").mkdir(parents=True)
    shared.chmod(0o777)
    python = shared / "venv" / "bin" / "python"
    python.write_text("")
    assert untrusted_reason(python) == f"{shared} is writable by group or others (mode 0777)"


@needs_root
def test_verify_does_not_run_an_interpreter_another_user_owns(tmp_path: Path) -> None:
    venv, marker = _planted_venv(tmp_path)
    tmp_path.chmod(0o755)
    python = venv / "bin" / "python"
    os.chown(python, 1000, 1000)
    found = python_of(str(venv))
    assert found == Unknown(unknown=f"{python} is not run as root: {python} is owned by uid 1000, not root")
    assert not marker.exists()
