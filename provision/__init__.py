"""provision: declarative provisioning for NVIDIA GPU workstations and servers.

Data flows one way: spec -> facts -> plan -> apply -> verify. Each stage is a
subpackage with one job; see README.md for the user-facing commands.
"""

__version__ = "0.1.0"
