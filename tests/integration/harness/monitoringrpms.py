"""Stand-in RPMs for monitoring on the RHEL family: DCGM 4 and dcgm-exporter in the stand-in
``rhel9``/``rhel10`` repositories (:mod:`.rhelrepo`), EPEL's ``node-exporter`` in the EPEL stand-in.

They are STAND-INS: no GPU, no NVML, no Go binary. What they mirror, and from where:

- DCGM names and versions: ``datacenter-gpu-manager-4-core`` and ``-4-cuda12``/``-4-cuda13`` at
  ``1:4.5.3-1`` and ``1:4.5.2-1`` (NVIDIA/DCGM cmake/packaging.cmake, the RPM components; CMakeLists.txt
  ``set(CPACK_RPM_PACKAGE_EPOCH 1)``, ``CPACK_RPM_PACKAGE_RELEASE 1``, no dist tag). Relations from the
  same file: each ``-cudaNN`` Requires ``datacenter-gpu-manager-4-core = 1:<v>-1`` and Provides
  ``datacenter-gpu-manager-4 = 1:<v>-1``; the core Conflicts with ``datacenter-gpu-manager`` (DCGM 3).
  Left out: the core's ``Requires: glibc >= 2.27, lshw`` and its ``shadow-utils`` pre-requirement,
  which no rpm of the Rocky-like target provides (its userland is Debian's).
- dcgm-exporter: ``datacenter-gpu-manager-exporter`` ``4.8.2-1`` / ``4.8.1-1``, the releases paired
  with 4.5.3 / 4.5.2 (NVIDIA/dcgm-exporter tags), as NVIDIA's CUDA repositories name their RPMs
  (``datacenter-gpu-manager-exporter-<v>-1.<arch>.rpm``; NVIDIA "Install DCGM Exporter": RPM package
  versions identify the exporter version), Requires ``datacenter-gpu-manager-4-core >= 1:4``.
- Units and programs: the same as the Debian stand-ins (:mod:`.dcgm`), under ``/usr/lib/systemd/system``.
- ``node-exporter`` ``1.9.1-2.el<major>`` (Fedora Packages, node-exporter: EPEL 9 1.9.1-2.el9, EPEL 10
  1.9.1-2.el10_1), Provides ``node_exporter``, with ``/usr/bin/node_exporter`` and the units
  ``prometheus-node-exporter.service`` and ``node_exporter.service`` (the package's file list). The
  units' text is not in that listing; the stand-in's run the binary with no arguments (as root: the
  package's ``prometheus`` user comes from its sysusers.d file, which the stand-in does not carry).
  ``/usr/bin/node_exporter`` is a small Python program taking the real
  ``--web.listen-address`` and ``--collector.textfile.directory`` flags: it serves ``/metrics`` with
  ``node_textfile_scrape_error`` and the samples of the directory's ``*.prom`` files, as the real
  textfile collector does (prometheus/node_exporter README, Textfile Collector).
"""

from __future__ import annotations

from .dcgm import _DEFAULT_COUNTERS, _EXPORTER, _EXPORTER_UNIT, _HOSTENGINE_UNIT
from .rpms import Rpm

DCGM_EPOCH = 1
PAIRS = (("4.5.3", "4.8.2"), ("4.5.2", "4.8.1"))
NODE_EXPORTER = "1.9.1"
UNITS = "/usr/lib/systemd/system"
HOSTENGINE = "#!/bin/sh\n# Stand-in nv-hostengine: no GPU to manage.\nexec sleep infinity\n"

_NODE_UNIT = """[Unit]
Description=Prometheus exporter for machine metrics (stand-in)

[Service]
ExecStart=/usr/bin/node_exporter

[Install]
WantedBy=multi-user.target
"""

_NODE_EXPORTER = r'''#!/usr/bin/python3
"""Stand-in node_exporter (provision's integration tests): --web.listen-address and the textfile
collector's --collector.textfile.directory, as the real flags; serves node_textfile_scrape_error and
the directory's *.prom samples. No machine metric is read."""
import argparse
import glob
import http.server
import socket

parser = argparse.ArgumentParser(prog="node_exporter")
parser.add_argument("--web.listen-address", dest="address", default=":9100")
parser.add_argument("--collector.textfile.directory", dest="textfile", default="")
args = parser.parse_args()
host, _, port = args.address.rpartition(":")
host = host.strip("[]") or "0.0.0.0"


def page():
    lines, error = [], 0
    for path in sorted(glob.glob(f"{args.textfile}/*.prom")) if args.textfile else []:
        try:
            with open(path, encoding="utf-8") as f:
                lines.append(f.read().rstrip("\n"))
        except OSError:
            error = 1
    name = "node_textfile_scrape_error"
    lines += [f"# HELP {name} 1 if there was an error opening or reading a file, 0 otherwise",
              f"# TYPE {name} gauge", f"{name} {error}"]
    return ("\n".join(lines) + "\n").encode()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/metrics"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.end_headers()
        if ok:
            self.wfile.write(page())

    def log_message(self, *a):
        pass


class Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in host else socket.AF_INET


Server((host, int(port)), Handler).serve_forever()
'''


def dcgm_rpms() -> list[Rpm]:
    """DCGM 4 (core, CUDA 12 and 13 plugins) and the exporter, at each pair of :data:`PAIRS`."""
    rpms: list[Rpm] = []
    for dcgm, exporter in PAIRS:
        evr = f"{DCGM_EPOCH}:{dcgm}-1"
        core = Rpm(
            "datacenter-gpu-manager-4-core",
            dcgm,
            "1",
            epoch=DCGM_EPOCH,
            conflicts=("datacenter-gpu-manager",),
            files=(
                ("/usr/bin/nv-hostengine", 0o755, HOSTENGINE),
                (f"{UNITS}/nvidia-dcgm.service", 0o644, _HOSTENGINE_UNIT),
            ),
        )
        plugins = [
            Rpm(
                f"datacenter-gpu-manager-4-cuda{major}",
                dcgm,
                "1",
                epoch=DCGM_EPOCH,
                requires=(f"datacenter-gpu-manager-4-core = {evr}",),
                provides=(f"datacenter-gpu-manager-4 = {evr}",),
            )
            for major in (12, 13)
        ]
        exp = Rpm(
            "datacenter-gpu-manager-exporter",
            exporter,
            "1",
            requires=("datacenter-gpu-manager-4-core >= 1:4",),
            files=(
                ("/usr/bin/dcgm-exporter", 0o755, _EXPORTER),
                ("/etc/dcgm-exporter/default-counters.csv", 0o644, _DEFAULT_COUNTERS),
                (f"{UNITS}/nvidia-dcgm-exporter.service", 0o644, _EXPORTER_UNIT),
            ),
        )
        rpms += [core, *plugins, exp]
    return rpms


def node_exporter_rpm(major: int) -> Rpm:
    """EPEL's ``node-exporter`` for EPEL ``major``."""
    release = "2.el9" if major == 9 else "2.el10_1"
    return Rpm(
        "node-exporter",
        NODE_EXPORTER,
        release,
        provides=(f"node_exporter = {NODE_EXPORTER}-{release}",),
        files=(
            ("/usr/bin/node_exporter", 0o755, _NODE_EXPORTER),
            (f"{UNITS}/prometheus-node-exporter.service", 0o644, _NODE_UNIT),
            (f"{UNITS}/node_exporter.service", 0o644, _NODE_UNIT),
        ),
    )
