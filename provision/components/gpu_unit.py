"""The boot unit ``provision-gpu-settings.service``: the spec's GPU settings and MIG instances
applied again at every boot, rendered in Python from argv lists (no template, no shell).

Power limits, clocks, compute modes and MIG instances do not survive a reboot or a driver unload
(NVML API, Device Commands: "not persistent across reboots or driver unloads"; MIG User Guide:
instances are not persistent). The unit is a oneshot ordered after ``nvidia-persistenced.service``
(the daemon keeps the driver loaded, so the settings hold once made) and after the fabric manager
(MIG on NVSwitch systems); the ``-`` prefix lets a MIG destroy command fail where there is nothing
to destroy (systemd.service(5), ExecStart). ``nvidia-smi`` is found on systemd's own search path.
ECC is not in it: its mode is kept by the GPU and takes effect at boot by itself.
"""

from __future__ import annotations

from provision.serving.unit import exec_start

HEADER = "# Managed by provision: the spec's GPU settings and MIG layout, applied at every boot.\n"


def render(settings: list[list[str]], mig: list[tuple[bool, list[str]]]) -> str:
    """The unit's whole text; empty when it has nothing to run.

    Args:
        settings: The runtime settings' argv lists, in order.
        mig: The MIG argv lists, each with whether it may fail (a destroy with nothing to destroy).
    """
    lines = [f"ExecStart={exec_start(tuple(a))}" for a in settings]
    lines += [f"ExecStart={'-' if may_fail else ''}{exec_start(tuple(a))}" for may_fail, a in mig]
    if not lines:
        return ""  # nothing to apply at boot: no unit (systemd refuses a service without ExecStart=)
    return (
        HEADER
        + "[Unit]\n"
        + "Description=GPU settings and MIG layout from provision's spec\n"
        + "Wants=nvidia-persistenced.service\n"
        + "After=nvidia-persistenced.service nvidia-fabricmanager.service\n"
        + "Before=nvidia-cdi-refresh.service nvidia-dcgm.service\n\n"
        + "[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        + "".join(f"{line}\n" for line in lines)
        + "\n[Install]\nWantedBy=multi-user.target\n"
    )
