"""Fleets: many hosts of an Ansible inventory, each mapped to its spec, planned and applied together.

Ansible is the distributed engine: the inventory is read with Ansible's own inventory
manager, detection and apply are single ansible-runner runs over all hosts (forks), and
per-host outcomes come from the runner's events.
"""

from provision.fleet.mapping import Fleet, FleetError, FleetFile, load_fleet
from provision.fleet.orchestrate import FleetPlan, HostPlan, HostState, detect_fleet, plan_fleet

__all__ = [
    "Fleet",
    "FleetError",
    "FleetFile",
    "FleetPlan",
    "HostPlan",
    "HostState",
    "detect_fleet",
    "load_fleet",
    "plan_fleet",
]
