"""Stand-ins for DCGM 4 and dcgm-exporter in the stand-in NVIDIA repository (``packages.py``).

They are STAND-INS: no GPU, no NVML. What they mirror of NVIDIA's packages, and from where:

- Names: ``datacenter-gpu-manager-4-core`` and ``datacenter-gpu-manager-4-cuda12`` /
  ``-cuda13`` (NVIDIA/DCGM cmake/packaging.cmake components ``-core``, ``-cuda12``, ``-cuda13``),
  and ``datacenter-gpu-manager-exporter`` (NVIDIA's CUDA repositories; public field repositories
  list ``datacenter-gpu-manager-exporter_4.8.2-1_amd64.deb``).
- Versions: DCGM ``1:4.5.3-1`` (DCGM 4 debs carry epoch 1: NVIDIA/dcgm-exporter's Dockerfile
  installs ``datacenter-gpu-manager-4-core=1:${DCGM_VERSION}``); exporter ``4.8.2-1``, the release
  paired with DCGM 4.5.3 (tag ``4.5.3-4.8.2``). The older pair 4.5.2 / 4.8.1 is there too, so a
  pin that fails would show.
- Dependencies: ``-cudaNN`` depends on ``-core`` of the same version (the plugin is loaded by the
  core's host engine; the exact relation is inferred); the exporter depends on
  ``datacenter-gpu-manager-4-core (>= 1:4)`` (public PKGBUILDs of the rpm:
  ``depends=('datacenter-gpu-manager-4-core>=4')``).
- Units: ``nvidia-dcgm.service`` with ``ExecStart=/usr/bin/nv-hostengine -n --service-account
  nvidia-dcgm`` (NVIDIA/DCGM config-files/systemd/nvidia-dcgm.service.in) and
  ``nvidia-dcgm-exporter.service`` with ``ExecStart=/usr/bin/dcgm-exporter -f
  /etc/dcgm-exporter/default-counters.csv`` (NVIDIA/dcgm-exporter packaging/config-files/systemd).
- ``/usr/bin/dcgm-exporter`` is a small Python program taking the real ``-f FILE`` and
  ``-a ADDRESS:PORT`` options: it serves ``/metrics`` in the real exporter's format (one
  ``# HELP`` / ``# TYPE`` pair and one sample per counter of the ``-f`` file, with the exporter's
  labels ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``), so what it
  serves follows the counters file provision writes. ``nv-hostengine`` only waits.
"""

from __future__ import annotations

from .packages import Package

DCGM_PAIRS = (("1:4.5.3-1", "4.8.2-1"), ("1:4.5.2-1", "4.8.1-1"))

_HOSTENGINE_UNIT = """[Unit]
Description=NVIDIA DCGM service
Wants=syslog.target
After=nvidia-gpu-reset.target

[Service]
User=root
PrivateTmp=false
Environment="DCGM_HOME_DIR=/var/log/nvidia-dcgm"
ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm
Restart=on-abort

[Install]
WantedBy=multi-user.target
Alias=dcgm.service
"""

_EXPORTER_UNIT = """[Unit]
Description=NVIDIA DCGM Exporter
Wants=nvidia-dcgm.service
After=nvidia-dcgm.service

[Service]
User=root
ExecStart=/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv
Restart=on-abort

[Install]
WantedBy=multi-user.target
"""

_DEFAULT_COUNTERS = """# Format
# If line starts with a '#' it is considered a comment
# DCGM FIELD, Prometheus metric type, help message
DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_GPU_TEMP,  gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
"""

_EXPORTER = r'''#!/usr/bin/python3
"""Stand-in dcgm-exporter (provision's integration tests): serves /metrics in the exporter's
format for the counters of -f, on -a ADDRESS:PORT. No GPU is read; values are fixed."""
import argparse
import csv
import http.server

VALUES = {"DCGM_FI_DEV_GPU_TEMP": 34, "DCGM_FI_DEV_MEMORY_TEMP": 31, "DCGM_FI_DEV_MEM_MAX_OP_TEMP": 95,
          "DCGM_FI_DEV_SLOWDOWN_TEMP": 90, "DCGM_FI_DEV_POWER_USAGE": 76.1,
          "DCGM_FI_DEV_POWER_MGMT_LIMIT": 700, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 1,
          "DCGM_FI_DEV_SM_CLOCK": 1980}
LABELS = ('gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",pci_bus_id="00000000:41:00.0",'
          'device="nvidia0",modelName="NVIDIA H200",Hostname="standin"')

parser = argparse.ArgumentParser(prog="dcgm-exporter")
parser.add_argument("-f", dest="counters", default="/etc/dcgm-exporter/default-counters.csv")
parser.add_argument("-a", dest="address", default=":9400")
parser.add_argument("--version", action="store_true")
args = parser.parse_args()
if args.version:
    print("dcgm-exporter version 4.8.2-4.5.3 (stand-in)")
    raise SystemExit(0)

lines = []
with open(args.counters, encoding="utf-8") as f:
    for row in csv.reader(f, skipinitialspace=True):
        if not row or row[0].strip().startswith("#") or len(row) < 3 or row[1].strip() == "label":
            continue
        name, kind, text = row[0].strip(), row[1].strip(), ", ".join(r.strip() for r in row[2:])
        sample = f"{name}{{{LABELS}}} {VALUES.get(name, 0)}"
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", sample]
page = ("\n".join(lines) + "\n").encode()

host, _, port = args.address.rpartition(":")
host = host.strip("[]") or "0.0.0.0"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/metrics"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.end_headers()
        if ok:
            self.wfile.write(page)

    def log_message(self, *a):
        pass


class Server(http.server.ThreadingHTTPServer):
    address_family = __import__("socket").AF_INET6 if ":" in host else __import__("socket").AF_INET


Server((host, int(port)), Handler).serve_forever()
'''


def dcgm_packages() -> list[Package]:
    """DCGM 4 (core, CUDA 12 and 13 plugins) and the exporter, at each pair of :data:`DCGM_PAIRS`."""
    packages: list[Package] = []
    for dcgm, exporter in DCGM_PAIRS:
        core = Package(
            "datacenter-gpu-manager-4-core",
            dcgm,
            files={
                "/usr/bin/nv-hostengine": (
                    0o755,
                    "#!/bin/sh\n# Stand-in nv-hostengine: no GPU to manage.\nexec sleep infinity\n",
                ),
                "/lib/systemd/system/nvidia-dcgm.service": (0o644, _HOSTENGINE_UNIT),
            },
        )
        plugins = [
            Package(
                f"datacenter-gpu-manager-4-cuda{major}",
                dcgm,
                depends=(f"datacenter-gpu-manager-4-core (= {dcgm})",),
            )
            for major in (12, 13)
        ]
        exp = Package(
            "datacenter-gpu-manager-exporter",
            exporter,
            depends=("datacenter-gpu-manager-4-core (>= 1:4)",),
            files={
                "/usr/bin/dcgm-exporter": (0o755, _EXPORTER),
                "/etc/dcgm-exporter/default-counters.csv": (0o644, _DEFAULT_COUNTERS),
                "/lib/systemd/system/nvidia-dcgm-exporter.service": (0o644, _EXPORTER_UNIT),
            },
        )
        packages += [core, *plugins, exp]
    return packages
