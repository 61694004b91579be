"""Fault injection (issue 13): a fault during a real apply on the Debian root, the fault removed,
then a plain re-apply that must converge with nothing lost.

"Nothing lost" is checked against a target on which the same spec converged cleanly (one per
module, :func:`clean`): every package dpkg knows with its version and hold, provision's pins,
source, keyring and unattended-upgrades guard, and the venv (interpreter, its dist-infos).

Faults are injected as the real thing leaves the machine, by the real tools where possible:
the pip wheel that ``ensurepip`` installs from is taken away (``python -m venv`` then fails as
when killed or out of space during ensurepip, leaving a venv without pip); the repository is
swapped for one apt refuses; dpkg's journal and a half-configured package are what a killed
dpkg leaves (dpkg(1)); Ctrl-C is a real SIGINT to the process running apply.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provision.openpgp import keyring_fingerprints
from tests.integration.harness import golden, timings
from tests.integration.harness import target as target_mod
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.integration.harness.target import Target
from tests.integration.helpers import provision, write_spec
from tests.unit.factories import one_plan

pytestmark = pytest.mark.faults

FILES = (
    "etc/apt/preferences.d/00-provision-nvidia",
    "etc/apt/sources.list.d/provision-nvidia-cuda.sources",
    "usr/share/keyrings/provision-nvidia-cuda.gpg",
    "etc/apt/apt.conf.d/51provision-nvidia-unattended",
)
VENV = "opt/provision/venv"
SITE = f"{VENV}/lib/python3.11/site-packages"
PIP_WHEEL_DIR = "usr/share/python-wheels"


def state(target: Target) -> dict[str, Any]:
    """What a converged target is made of: packages and holds, provision's files, the venv."""
    root = target.root
    files = {f: (root / f).read_bytes() if (root / f).exists() else None for f in FILES}
    site = root / SITE
    return {
        "packages": target.dpkg_status(),
        "files": files,
        "interpreter": os.path.lexists(root / VENV / "bin/python"),
        "dist-info": sorted(p.name for p in site.glob("*.dist-info")) if site.exists() else [],
        "records": sorted(p.parent.name for p in site.glob("*.dist-info/RECORD")) if site.exists() else [],
    }


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Human-readable differences between two :func:`state` values (empty when equal)."""
    out = []
    for name in sorted(set(got["packages"]) | set(want["packages"])):
        if got["packages"].get(name) != want["packages"].get(name):
            out.append(f"package {name}: {got['packages'].get(name)} != {want['packages'].get(name)}")
    out += [f"file {f} differs" for f in FILES if got["files"][f] != want["files"][f]]
    out += [
        f"{k}: {got[k]} != {want[k]}" for k in ("interpreter", "dist-info", "records") if got[k] != want[k]
    ]
    return out


@pytest.fixture(scope="module")
def spec_for(
    tmp_path_factory: pytest.TempPathFactory, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex
) -> Callable[..., Path]:
    """Writes the full Debian 12 spec (driver, CUDA, cuDNN, NCCL, venv with torch); keywords replace
    sections."""
    where = tmp_path_factory.mktemp("specs")

    def write(name: str = "spec", **over: Any) -> Path:
        return write_spec(where / f"{name}.yaml", nvidia_repo.url, nvidia_repo, wheel_index, **over)

    return write


@pytest.fixture(scope="module")
def clean(
    golden_root: golden.GoldenRoot, spec_for: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The state of a target on which the spec converged in one clean apply (shared by the module)."""
    work = tmp_path_factory.mktemp("clean")
    box = target_mod.start_target(golden_root.path, golden_root.ssh_key, work / "target")
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("PROVISION_RUNS_DIR", str(work / "runs"))
            with timings.timed("faults: clean reference apply"):
                first = provision("apply", str(spec_for()), "-i", str(box.inventory), "--yes")
        assert first.exit_code == 0, first.output
        return state(box)
    finally:
        box.close()


def apply(spec: Path, target: Target, *extra: str) -> Any:
    with timings.timed("faults: apply"):
        return provision("apply", str(spec), "-i", str(target.inventory), "--yes", *extra)


def converges(spec: Path, target: Target, clean_state: dict[str, Any] | None) -> str:
    """Apply again: it must converge, and the target must equal the clean one (when given)."""
    again = apply(spec, target)
    assert again.exit_code == 0, again.output
    assert "Converged: a fresh plan shows no changes." in again.output
    if clean_state is not None:
        assert differences(state(target), clean_state) == []
    return str(again.output)


def test_venv_left_without_pip_is_repaired(
    target: Target, spec_for: Callable[..., Path], clean: dict[str, Any], runs: Path
) -> None:
    wheels = target.root / PIP_WHEEL_DIR
    kept = target.workdir / "python-wheels"
    shutil.move(wheels, kept)  # fault: ensurepip has nothing to install (as out of space or killed mid-way)
    failed = apply(spec_for(), target)
    assert failed.exit_code == 1, failed.output
    assert (target.root / VENV / "pyvenv.cfg").exists()
    assert not list((target.root / SITE).glob("pip-*.dist-info"))

    shutil.move(kept, wheels)  # the fault removed
    plan = one_plan(
        json.loads(provision("plan", str(spec_for()), "-i", str(target.inventory), "--json").stdout)
    )
    venv = next(s for s in plan["steps"] if s["component"] == "python_venv")
    assert (venv["action"], venv["current"]) == ("install", "incomplete (no pip)")
    converges(spec_for(), target, clean)


def test_half_installed_torch_is_reinstalled(
    target: Target, spec_for: Callable[..., Path], clean: dict[str, Any], runs: Path
) -> None:
    assert apply(spec_for(), target).exit_code == 0
    # What pip leaves when killed before its last write: the files, a dist-info without RECORD.
    record = next((target.root / SITE).glob("torch-*.dist-info")) / "RECORD"
    record.unlink()
    plan = one_plan(
        json.loads(provision("plan", str(spec_for()), "-i", str(target.inventory), "--json").stdout)
    )
    wheels = next(s for s in plan["steps"] if s["component"] == "python_wheels")
    assert wheels["action"] == "install" and wheels["current"].startswith("half-installed torch==")
    converges(spec_for(), target, clean)


def test_refused_repository_restores_pins_source_and_keyring_then_upgrade_and_rotation_converge(
    target: Target, spec_for: Callable[..., Path], nvidia_repo: NvidiaRepo, clean: dict[str, Any], runs: Path
) -> None:
    """One provisioned box through three events: a refused repository (the previous pins, source and
    keyring must survive), the cuDNN upgrade of a held stack, and a rotated repository key."""
    assert apply(spec_for(), target).exit_code == 0
    before = state(target)
    assert differences(before, clean) == []
    cuda = {"toolkit": "13.0", "cudnn": "9.20", "nccl": "2.28.3"}

    refused = apply(
        spec_for("bad", cuda=cuda, repository=_repo(nvidia_repo.bad("unsigned"), nvidia_repo)), target
    )
    assert refused.exit_code == 1, refused.output
    assert "apt refused the NVIDIA repository" in refused.output
    assert "E: " in refused.output or "W: " in refused.output  # apt's own reason, not an empty tail
    assert differences(state(target), before) == []  # the previous pins, source and keyring are back

    upgraded = apply(spec_for("cudnn920", cuda=cuda), target)  # held stack, -dev needs the new headers
    assert upgraded.exit_code == 0, upgraded.output
    status = target.dpkg_status()
    for name in ("libcudnn9-cuda-13", "libcudnn9-headers-cuda-13", "libcudnn9-dev-cuda-13"):
        assert status[name] == ("9.20.0.48-1", "hold ok installed"), name

    other = nvidia_repo._other_key
    nvidia_repo.bad("other-key")  # the same packages, now signed by another key
    rotated = spec_for(
        "rotated", cuda=cuda, repository=_repo(nvidia_repo.bad("other-key"), nvidia_repo, other)
    )
    plan = provision("plan", str(rotated), "-i", str(target.inventory), "--detailed-exitcode")
    assert plan.exit_code == 2, plan.output
    assert "repository key rotated" in plan.output
    converges(rotated, target, None)
    assert keyring_fingerprints((target.root / FILES[2]).read_bytes()) == (other.fingerprint,)


def _repo(url: str, repo: NvidiaRepo, key: Any = None) -> dict[str, str]:
    return {
        "url": url,
        "key_file": str((key or repo).keyring),
        "fingerprint": (key or repo).fingerprint,
    }


def test_interrupted_dpkg_and_a_half_configured_package_get_advice_that_works(
    target: Target, spec_for: Callable[..., Path], clean: dict[str, Any], runs: Path
) -> None:
    # What a killed dpkg leaves: a journal entry and a package whose configuration did not finish.
    (target.root / "var/lib/dpkg/updates/0000").write_text("")
    status = target.root / "var/lib/dpkg/status"
    text = status.read_text()
    stanza = text.index("Package: distro-info-data\n")
    end = text.index("\n\n", stanza)
    status.write_text(
        text[:stanza]
        + text[stanza:end].replace("install ok installed", "install ok half-configured")
        + text[end:]
    )

    refused = apply(spec_for(), target)
    assert refused.exit_code == 1, refused.output
    assert "broken-package-state" in refused.output
    assert "distro-info-data (install ok half-configured)" in refused.output
    assert "run `dpkg --configure -a`" in refused.output and "fix-broken" not in refused.output

    target.run(["dpkg", "--configure", "-a"], check=True)  # the advice, as a user would follow it
    converges(spec_for(), target, clean)


def test_ctrl_c_during_apply_says_interrupted_leaves_no_process_and_the_next_apply_converges(
    target: Target, spec_for: Callable[..., Path], clean: dict[str, Any], runs: Path
) -> None:
    source = target.root / FILES[1]
    # Started as a background job of a shell without job control would be: SIGINT ignored. The
    # apply's own handling must still stop the run, and leave Python's handler, not SIG_IGN, behind.
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _interrupt_when(source.exists):
            interrupted = apply(spec_for(), target)
        handler_after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert interrupted.exit_code == 130, interrupted.output
    assert "Interrupted" in interrupted.output
    assert "Reboot required" not in interrupted.output
    assert _ansible_processes(target) == []
    assert handler_after is signal.default_int_handler

    if "broken-package-state" in provision("plan", str(spec_for()), "-i", str(target.inventory)).output:
        target.run(["dpkg", "--configure", "-a"], check=True)  # apt was stopped mid-run: the advice
    converges(spec_for(), target, clean)


class _interrupt_when:
    """Send this process one SIGINT (Ctrl-C) as soon as ``ready()`` is true, from a watcher thread."""

    def __init__(self, ready: Callable[[], bool]) -> None:
        self.ready = ready
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.stop.is_set():
            if self.ready():
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.02)

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _ansible_processes(target: Target) -> list[str]:
    """Command lines of live ansible-playbook processes (main or worker) run against ``target``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "ansible-playbook" in cmd and str(target.inventory) in cmd and _state(entry) != "Z":
                found.append(cmd)
    return found


def _state(proc: Path) -> str:
    try:
        return (proc / "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "Z"


def test_repository_written_but_never_indexed_is_refreshed(
    target: Target, spec_for: Callable[..., Path], clean: dict[str, Any], runs: Path
) -> None:
    """The deterministic form of an apply stopped between writing the source and ``apt-get update``
    finishing (Ctrl-C, a dropped ssh, a full disk): provision's files are exactly what the role writes,
    so none of them changes on the next run, but apt holds no index of the repository."""
    for name in FILES[:3]:  # pins, source, keyring: as the clean apply wrote them
        path = target.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(clean["files"][name])
    indexed = target.run(["apt-get", "indextargets", "--format", "$(URI)"], check=True).stdout
    assert "/repos/debian12/" not in indexed  # the fault really is in place: no index of the repository
    converges(spec_for(), target, clean)
