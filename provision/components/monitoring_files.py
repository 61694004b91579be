"""The exact text of every file the monitoring role writes, rendered here from the spec (pure).

Spec values never reach a Jinja template or a shell string: each file is rendered in Python
(the Prometheus configuration as YAML from a structure), handed to the role as data, and
written by ``ansible.builtin.copy``. The plan compares each file's SHA-256 with what detection
read (:class:`~provision.detect.domains.monitoring.ManagedFiles`), so a re-apply changes
nothing and a drifted file is rewritten.

Sources: NVIDIA/dcgm-exporter (``-f`` counters file, ``-a`` listen address, unit
``nvidia-dcgm-exporter.service`` with ``ExecStart=/usr/bin/dcgm-exporter -f ...``); Debian's
prometheus and prometheus-node-exporter units (``ExecStart=/usr/bin/<daemon> $ARGS`` with
``ARGS`` from ``/etc/default/<package>``); EPEL's node-exporter (``/usr/bin/node_exporter``,
unit ``prometheus-node-exporter.service``; Fedora Packages), whose settings file has no public
listing, so a drop-in runs the binary with provision's arguments; systemd.service(5) (an empty
``ExecStart=`` in a drop-in clears the unit's own before the new one).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from ipaddress import ip_address
from typing import TYPE_CHECKING

from provision.resources import data_dir
from provision.spec.models import MonitoringSpec

if TYPE_CHECKING:
    from provision.catalog.monitoring import MonitoringCatalog

HEADER = (
    "# Managed by provision (spec section monitoring:); changes here are overwritten by provision apply.\n"
)
SCRAPE_INTERVAL = "15s"
"""Prometheus's own default scrape and evaluation interval (prometheus.io, Configuration)."""
ROLE_FILES = ("roles", "monitoring", "files")


@dataclass(frozen=True)
class ManagedFile:
    """One file the monitoring role writes.

    Attributes:
        dest: Absolute path on the host.
        content: Its exact text.
        service: The systemd unit that reads it (restarted when the file changes).
        what: What the file is, for the plan's reason.
        src: The role's file it is copied from (``files/<src>``), for files shipped with the role:
            the alert rules hold Prometheus's own ``{{ $labels.x }}`` templates, which must not
            travel as a variable (Ansible would evaluate them; the runner refuses such values).
    """

    dest: str
    content: str
    service: str
    what: str
    src: str | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content.encode()).hexdigest()

    def as_var(self) -> dict[str, str]:
        """The role's view: ``src`` (a role file) or ``content`` (rendered text), with dest and service."""
        source = {"src": self.src} if self.src else {"content": self.content}
        return {"dest": self.dest, "service": self.service} | source


def host_port(address: str, port: int) -> str:
    """``address:port`` with an IPv6 address in brackets (``[::]:9400``)."""
    return f"[{address}]:{port}" if ip_address(address).version == 6 else f"{address}:{port}"


def local_target(listen: str, port: int) -> str:
    """Where a scraper on this host reaches a service bound to ``listen``: a wildcard address is
    reached on localhost, a specific one on itself."""
    return f"localhost:{port}" if ip_address(listen).is_unspecified else host_port(listen, port)


def role_file(name: str) -> str:
    """The text of a file shipped in the monitoring role's ``files/`` directory."""
    return data_dir("playbooks").joinpath(*ROLE_FILES, name).read_text(encoding="utf-8")


def managed_files(
    spec: MonitoringSpec, cat: MonitoringCatalog, fleet_hosts: tuple[str, ...] = ()
) -> tuple[ManagedFile, ...]:
    """Every file for ``spec``, in write order; the Prometheus files only with ``prometheus: true``.

    Args:
        spec: The spec's monitoring section.
        cat: The monitoring catalog (paths, services).
        fleet_hosts: Other inventory hosts with a monitoring section, scraped besides ``scrape_hosts``.
    """
    exporter, prom = cat.exporter, cat.prometheus
    files = [
        _shipped(exporter.counters_file, "dcgm-counters.csv", exporter.service, "counters file"),
        ManagedFile(
            f"/etc/systemd/system/{exporter.service}.service.d/provision.conf",
            exporter_dropin(spec, cat),
            exporter.service,
            "dcgm-exporter drop-in",
        ),
        node_exporter_file(spec, cat),
    ]
    if (
        spec.prometheus
        and cat.prometheus_refused is None
        and prom.defaults_file
        and prom.config_file
        and prom.rules_file
    ):
        files += [
            ManagedFile(prom.defaults_file, prometheus_defaults(spec), prom.service, "Prometheus ARGS"),
            _shipped(prom.rules_file, "provision-gpu.rules.yml", prom.service, "alert rules"),
            ManagedFile(
                prom.config_file,
                prometheus_config(spec, cat, fleet_hosts),
                prom.service,
                "scrape configuration",
            ),
        ]
    return tuple(files)


def _shipped(dest: str, name: str, service: str, what: str) -> ManagedFile:
    return ManagedFile(dest, role_file(name), service, what, src=name)


def exporter_dropin(spec: MonitoringSpec, cat: MonitoringCatalog) -> str:
    """The systemd drop-in running dcgm-exporter with provision's counters on the spec's address."""
    exporter = cat.exporter
    listen = host_port(spec.listen, spec.exporter_port)
    return (
        HEADER + "[Service]\nExecStart=\n"
        f"ExecStart={exporter.binary} -f {exporter.counters_file} -a {listen}\n"
    )


def node_exporter_args(spec: MonitoringSpec, cat: MonitoringCatalog) -> str:
    """node exporter's listen address and textfile directory, as its command-line flags."""
    listen = host_port(spec.listen, spec.node_exporter_port)
    return f"--web.listen-address={listen} --collector.textfile.directory={cat.node_exporter.textfile_dir}"


def node_exporter_file(spec: MonitoringSpec, cat: MonitoringCatalog) -> ManagedFile:
    """Debian's ``/etc/default/prometheus-node-exporter`` (the unit reads ``ARGS`` from it), or where
    the package's settings file has no public source (EPEL), a drop-in running its binary."""
    node = cat.node_exporter
    if node.defaults_file:
        return ManagedFile(
            node.defaults_file, node_exporter_defaults(spec, cat), node.service, "node exporter ARGS"
        )
    return ManagedFile(
        f"/etc/systemd/system/{node.service}.service.d/provision.conf",
        HEADER + f"[Service]\nExecStart=\nExecStart={node.binary} {node_exporter_args(spec, cat)}\n",
        node.service,
        "node exporter drop-in",
    )


def node_exporter_defaults(spec: MonitoringSpec, cat: MonitoringCatalog) -> str:
    """``/etc/default/prometheus-node-exporter``: listen address and the textfile directory."""
    return HEADER + f'ARGS="{node_exporter_args(spec, cat)}"\n'


def prometheus_defaults(spec: MonitoringSpec) -> str:
    """``/etc/default/prometheus``: Prometheus's listen address."""
    return HEADER + f'ARGS="--web.listen-address={host_port(spec.prometheus_listen, spec.prometheus_port)}"\n'


def scrape_targets(spec: MonitoringSpec, fleet_hosts: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Targets per job: ``dcgm`` (dcgm-exporter), ``node`` (node exporter), ``prometheus`` (itself)."""
    others = tuple(dict.fromkeys((*spec.scrape_hosts, *fleet_hosts)))
    return {
        "dcgm": [local_target(spec.listen, spec.exporter_port)]
        + [host_port_name(h, spec.exporter_port) for h in others],
        "node": [local_target(spec.listen, spec.node_exporter_port)]
        + [host_port_name(h, spec.node_exporter_port) for h in others],
        "prometheus": [local_target(spec.prometheus_listen, spec.prometheus_port)],
    }


def host_port_name(host: str, port: int) -> str:
    """``host:port`` for a host name or IPv4 address."""
    return f"{host}:{port}"


def prometheus_config(spec: MonitoringSpec, cat: MonitoringCatalog, fleet_hosts: tuple[str, ...] = ()) -> str:
    """``prometheus.yml``: the scrape jobs and provision's rule file, as YAML from a structure."""
    targets = scrape_targets(spec, fleet_hosts)
    config = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [cat.prometheus.rules_file],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": hosts}]} for job, hosts in targets.items()
        ],
    }
    from ruamel.yaml import YAML  # only when a Prometheus configuration is rendered (start-up time)

    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(config, out)
    return HEADER + out.getvalue()
