"""Probes: the commands detection runs, one per fact source.

Probe ids are the stems of the captured fixture files (``shared/fixtures/*/<id>.txt``),
so a captured directory and a fresh detection feed the same parsers. Every probe is an
argv list; the only shell scripts are fixed text of our own, and values such as the
venv path travel as separate argv items.

Timeouts: the slowest probe measured on an H200 took 120 ms (``nvidia-smi -q``,
``shared/reference/measurements.md``); nvidia-smi gets 20 s because a GPU that has
fallen off the bus can stall it for seconds before it fails.
"""

from __future__ import annotations

from typing import Any

from provision.models import Frozen

QUERY_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "vbios_version",
    "memory.total",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "persistence_mode",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "power.limit",
    "compute_cap",
    "mig.mode.current",
    "ecc.mode.current",
)
"""Fields of ``nvidia-smi --query-gpu``, the same as the captured H200 fixture."""

DPKG_FORMAT = r"${Package}\t${Version}\t${Status}\n"
"""dpkg-query format; dpkg expands the ``\\t``/``\\n`` escapes itself."""

_CUDA_DIRS_SCRIPT = (
    "ls -la /usr/local/; "
    'if [ -L /usr/local/cuda ]; then echo "resolved cuda -> $(readlink -f /usr/local/cuda)"; fi'
)
# pyvenv.cfg and the dist-info names tell the interpreter and installed wheels without starting python.
_VENV_SCRIPT = (
    'echo "path $1"; cat "$1/pyvenv.cfg" || exit 1; '
    'ls -d "$1"/lib*/python3*/site-packages/*.dist-info 2>/dev/null; exit 0'
)
# nvcc is rarely on a non-login PATH; fall back to the default toolkit's copy.
_NVCC_SCRIPT = 'p=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc); echo "$p"; exec "$p" --version'
# Reads torch/version.py with ast instead of importing torch (4 s on the H200,
# measurements.md) and prints the same `key value` lines as the fixture's torch.txt.
_TORCH_SCRIPT = "; ".join(
    (
        "import ast, glob, os, sys",
        "venv = sys.argv[1]",
        'print("venv", venv)',
        'print("python", sys.version.replace(chr(10), " "))',
        'found = glob.glob(os.path.join(venv, "lib*", "python3*", "site-packages", "torch", "version.py"))',
        'found or sys.exit("torch: not installed in " + venv)',
        "body = ast.parse(open(found[0]).read()).body",
        "pairs = [(n.targets[0] if isinstance(n, ast.Assign) else n.target, n.value) for n in body"
        " if isinstance(n, (ast.Assign, ast.AnnAssign))]",
        "values = {t.id: v.value for t, v in pairs if isinstance(t, ast.Name) and isinstance(v, ast.Constant)}",
        'print("torch", values.get("__version__"))',
        'print("cuda", values.get("cuda"))',
    )
)


class Probe(Frozen):
    """One command whose output one parser reads.

    Attributes:
        id: Probe id and raw file stem, e.g. ``query-gpu``.
        argv: The command; run without a shell.
        timeout: Seconds before the collector kills it (rc 124).
    """

    id: str
    argv: tuple[str, ...]
    timeout: float = 10.0

    def to_json(self) -> dict[str, Any]:
        """The collector's input form: ``{"id", "argv", "timeout"}``."""
        return {"id": self.id, "argv": list(self.argv), "timeout": self.timeout}


def _sh(probe_id: str, script: str, *args: str, timeout: float = 10.0) -> Probe:
    return Probe(id=probe_id, argv=("sh", "-c", script, "sh", *args), timeout=timeout)


def system_probes() -> list[Probe]:
    """Probes for the OS, kernel, loaded and on-disk driver, and packages."""
    return [
        Probe(id="os-release", argv=("cat", "/etc/os-release")),
        Probe(id="uname", argv=("uname", "-a")),
        Probe(id="proc-version", argv=("cat", "/proc/version")),
        Probe(id="driver-version", argv=("cat", "/proc/driver/nvidia/version")),
        Probe(id="modinfo", argv=("modinfo", "-F", "version", "nvidia")),
        Probe(id="dpkg-nvidia", argv=("dpkg-query", "-W", f"-f={DPKG_FORMAT}"), timeout=30.0),
    ]


def gpu_probes() -> list[Probe]:
    """Probes for GPUs, topology and the CUDA toolkit."""
    query = "--query-gpu=" + ",".join(QUERY_GPU_FIELDS)
    return [
        Probe(id="query-gpu", argv=("nvidia-smi", query, "--format=csv"), timeout=20.0),
        Probe(id="topo-m", argv=("nvidia-smi", "topo", "-m"), timeout=20.0),
        _sh("cuda-dirs", _CUDA_DIRS_SCRIPT),
        _sh("nvcc", _NVCC_SCRIPT),
    ]


def torch_probe(venv: str) -> Probe:
    """Read torch's version and CUDA build from ``venv`` without importing torch."""
    return Probe(id="torch", argv=(f"{venv}/bin/python", "-I", "-c", _TORCH_SCRIPT, venv), timeout=15.0)


def venv_probes(venv: str) -> list[Probe]:
    """The venv's interpreter and distributions (``venv``) and torch's build (``torch``)."""
    return [_sh("venv", _VENV_SCRIPT, venv), torch_probe(venv)]


def all_probes(venv: str | None = None) -> list[Probe]:
    """Every probe detection runs; the venv and torch probes only when a venv is given."""
    # Imported here: hardware.py and system.py build on Probe, defined above.
    from provision.detect.hardware import hardware_probes
    from provision.detect.system import surroundings_probes

    extra = venv_probes(venv) if venv else []
    probes = [*system_probes(), *gpu_probes(), *surroundings_probes(), *extra]
    # A hardware probe whose id is already listed (nvidia-smi-q) runs once: same id, same command.
    return probes + [p for p in hardware_probes() if p.id not in {q.id for q in probes}]
