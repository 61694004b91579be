"""What monitoring's plan reads: the TCP ports in use (``ss``) and provision's monitoring files
on disk (their SHA-256, ``sha256sum``).

Sources: ss(8) from iproute2 (``-H`` no header, ``-l`` listening, ``-t`` TCP, ``-n`` numeric,
``-p`` the owning process, shown for other users' sockets only to root); sha256sum(1) prints
``<hex>  <path>`` per readable file and a message per missing one.
"""

from __future__ import annotations

import re

from pydantic import Field

from provision.detect.fact import Derive, Fact, Unknown, failure, first_line, if_probed
from provision.models import Frozen

MANAGED_FILES: tuple[str, ...] = (
    "/etc/dcgm-exporter/provision-counters.csv",
    "/etc/systemd/system/nvidia-dcgm-exporter.service.d/provision.conf",
    "/etc/default/prometheus-node-exporter",
    "/etc/default/prometheus",
    "/etc/prometheus/provision-gpu.rules.yml",
    "/etc/prometheus/prometheus.yml",
    "/etc/systemd/system/prometheus-node-exporter.service.d/provision.conf",
)
"""Every file the monitoring role writes, on Debian and then the one RHEL's differ by (the node
exporter's drop-in; the catalog's ``monitoring.yaml`` names the same paths,
``tests/unit/test_monitoring.py`` keeps them equal)."""


class Socket(Frozen):
    """One listening TCP socket.

    Attributes:
        address: The local address as ss prints it without brackets (``0.0.0.0``, ``::``, ``*``).
        port: The local port.
        process: The owning process's name (``dcgm-exporter``), None when ss did not show it.
    """

    address: str
    port: int
    process: str | None = None


class Listening(Frozen):
    """Every listening TCP socket of the host."""

    sockets: tuple[Socket, ...] = ()

    def on_port(self, port: int) -> tuple[Socket, ...]:
        """The sockets bound to ``port`` (any address)."""
        return tuple(s for s in self.sockets if s.port == port)


class ManagedFiles(Frozen):
    """SHA-256 (hex) of each of :data:`MANAGED_FILES` present on disk, by path."""

    sha256: dict[str, str] = Field(default_factory=dict)


_LOCAL = re.compile(r"^\[?(?P<addr>[^\]]*?)\]?(%\S+)?:(?P<port>\d{1,5})$")
_PROCESS = re.compile(r'users:\(\("(?P<name>[^"]{1,64})"')


def parse_listening(output: str, rc: int) -> Listening | Unknown:
    """``ss -Hltnp`` -> :class:`Listening`; lines that are not a LISTEN row are skipped."""
    if (bad := failure("ss", output, rc)) is not None:
        return bad
    sockets = []
    for line in output.splitlines():
        words = line.split()
        if len(words) < 5 or words[0] != "LISTEN":
            continue
        local = _LOCAL.match(words[3])
        if local is None:
            continue
        process = _PROCESS.search(line)
        sockets.append(
            Socket(
                address=local["addr"],
                port=int(local["port"]),
                process=process["name"] if process else None,
            )
        )
    if not sockets and output.strip() and not output.lstrip().startswith("LISTEN"):
        return Unknown(unknown=f"unexpected ss output: {first_line(output)}")
    return Listening(sockets=tuple(sockets))


_SUM = re.compile(r"^(?P<hex>[0-9a-f]{64}) [ *](?P<path>/\S+)$")


def parse_managed_files(output: str, rc: int) -> ManagedFiles | Unknown:
    """``sha256sum FILES`` -> :class:`ManagedFiles`; exit status 1 only says some file is missing."""
    if rc != 1 and (bad := failure("sha256sum", output, rc)) is not None:
        return bad
    found = {m["path"]: m["hex"] for line in output.splitlines() if (m := _SUM.match(line.strip()))}
    return ManagedFiles(sha256={p: h for p, h in found.items() if p in MANAGED_FILES})


class ListeningFact(Fact[Listening]):
    """Listening TCP sockets and their processes: ``ss -Hltnp``."""

    id = "listening"
    argv = ("ss", "-Hltnp")
    parse = staticmethod(parse_listening)


class ManagedFilesFact(Fact[ManagedFiles]):
    """SHA-256 of provision's monitoring files (absent ones are left out)."""

    id = "monitoring-files"
    argv = ("sha256sum", *MANAGED_FILES)
    parse = staticmethod(parse_managed_files)


FACTS = (ListeningFact, ManagedFilesFact)

FIELDS: dict[str, Derive] = {
    "listening": if_probed(ListeningFact),
    "monitoring_files": if_probed(ManagedFilesFact),
}
