"""What the apply tests of tests/integration and tests/fleet share: the stack apply installs,
the spec for the Debian 12 target, and the CLI call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from provision.cli import cli
from tests.integration.harness.services import NvidiaRepo, WheelIndex
from tests.unit.factories import one_plan

STACK = {
    "nvidia-driver-pinning-580": "580.95.05-1",
    "nvidia-open": "580.95.05-1",
    "nvidia-driver-open": "580.95.05-1",
    "libnvidia-compute": "580.95.05-1",
    "nvidia-kernel-open-dkms": "580.95.05-1",
    "nvidia-utils": "580.95.05-1",
    "cuda-toolkit-13-0": "13.0.2-1",
    "cuda-nvcc-13-0": "13.0.88-1",
    "libcudnn9-cuda-13": "9.14.0.64-1",
    "libcudnn9-headers-cuda-13": "9.14.0.64-1",
    "libcudnn9-dev-cuda-13": "9.14.0.64-1",
    "libnccl2": "2.28.3-1+cuda13.0",
    "libnccl-dev": "2.28.3-1+cuda13.0",
}


def write_spec(
    path: Path, repo_url: str, nvidia_repo: NvidiaRepo, wheel_index: WheelIndex, **over: Any
) -> Path:
    """A spec for the Debian 12 target, pointing at the signed stand-in repository and wheel index."""
    spec: dict[str, Any] = {
        "schema_version": 1,
        "name": "debian12-target",
        "os": {"distro": "debian", "version": "12"},
        "gpus": {"model": "a100x", "count": 2},
        "driver": {"branch": 580, "flavor": "open", "version": "580.95.05", "source": "nvidia-repo"},
        "cuda": {"toolkit": "13.0", "cudnn": "9.14", "nccl": "2.28.3"},
        "python": {
            "interpreter": "3.11",
            "venv": "/opt/provision/venv",
            "torch": "2.11.0",
            "cuda_variant": "cu130",
            "index_url": wheel_index.url,
        },
        "repository": {
            "url": repo_url,
            # The stand-in serves its key over loopback http, which key_url refuses: read it as a file.
            "key_file": str(nvidia_repo.keyring),
            "fingerprint": nvidia_repo.fingerprint,
        },
    }
    spec.update(over)
    path.write_text(yaml.safe_dump(spec))
    return path


def provision(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def assert_no_change_unconfirmed(plan: dict[str, Any]) -> None:
    """A plan of a GPU-less test root after a converged apply: no change, and a summary that does not
    say the machine matches the spec, since no GPU (and so the driver side) could be read there.
    ``plan``: one host's plan with its summary, or the ``plan --json`` document of that one host."""
    if isinstance(plan.get("hosts"), list):
        plan = one_plan(plan)
    unread = [w["rule"] for w in plan["warnings"] if w["unconfirmed"]]
    assert "gpus-not-visible" in unread, plan["warnings"]
    assert not [s for s in plan["steps"] if s["action"] != "noop"], plan["steps"]
    assert plan["summary"] == (
        "No changes planned, but the machine is not confirmed to match the spec: "
        f"{len(unread)} warning(s) name facts that could not be read."
    )
