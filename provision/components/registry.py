"""Every installable component, in plan order: the one list the planner, validate and apply read.

Adding a component: a module here with an :class:`~provision.components.base.InstallableComponent`,
one line below, its spec section, its catalog data file and its role (docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provision.components.base import Component, InstallableComponent
from provision.components.containers import Containers
from provision.components.cuda_toolkit import CudaToolkit
from provision.components.cudnn import Cudnn
from provision.components.dkms import Dkms
from provision.components.driver import Driver
from provision.components.fabric_manager import FabricManager
from provision.components.gpu_settings import GpuSettingsComponent
from provision.components.holds import Holds
from provision.components.kernel_modules import KernelModules
from provision.components.mig import Mig
from provision.components.monitoring import Dcgm, Monitoring
from provision.components.nccl import Nccl
from provision.components.python_env import PythonEnv
from provision.components.repository import Repository
from provision.components.secure_boot import SecureBoot
from provision.components.serve import Serve
from provision.spec.models import Spec

if TYPE_CHECKING:
    from provision.os.base import PackageManager, Pin

COMPONENTS: tuple[InstallableComponent, ...] = (
    Repository(),
    KernelModules(),
    Dkms(),
    Driver(),
    FabricManager(),
    CudaToolkit(),
    Cudnn(),
    Nccl(),
    Containers(),
    Holds(),
    GpuSettingsComponent(),
    Mig(),
    PythonEnv(),
    SecureBoot(),
    Serve(),
    Dcgm(),
    Monitoring(),
)
"""In the order their steps are shown (``stage`` orders their planning)."""


def transaction_components() -> frozenset[Component]:
    """Components whose packages go into the one package transaction."""
    return frozenset(c.name for c in COMPONENTS if c.transaction)


def pins(spec: Spec, pm: PackageManager) -> tuple[Pin, ...]:
    """Every component's version pins for ``spec``, in registry order."""
    return tuple(p for c in COMPONENTS for p in c.pins(spec, pm))


def roles() -> tuple[str, ...]:
    """The roles that carry components out, once each, in registry order."""
    return tuple(dict.fromkeys(c.role for c in COMPONENTS if c.role is not None))
