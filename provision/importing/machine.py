"""The machine's part of an imported spec: OS, GPUs (model, count, binding) and the fabric manager.

Read through :class:`~provision.detect.facts.Facts` and the catalog's GPU models only; what the
facts cannot tell is refused with the reason (:class:`~provision.importing.draft.NotImportable`).
"""

from __future__ import annotations

from typing import Any, get_args

from provision.catalog import Catalog
from provision.catalog.models import GpuModel
from provision.detect.facts import Facts, Gpu, Kernel, OsRelease, Unknown
from provision.errors import did_you_mean
from provision.importing.draft import Draft, NotImportable
from provision.spec.models import GpuSpec, OsSpec
from provision.unknown import because


def _allowed(model: Any, name: str) -> tuple[str, ...]:
    """The values a ``Literal`` field of a spec model accepts (they follow the model as it grows)."""
    return tuple(str(v) for v in get_args(model.model_fields[name].annotation))


def os_section(draft: Draft, facts: Facts) -> None:
    """``os:`` from ``/etc/os-release`` and ``uname -m``.

    Raises:
        NotImportable: The OS was not read, or is one a spec cannot name.
    """
    os, kernel = facts.os, facts.kernel
    if not isinstance(os, OsRelease):
        raise NotImportable(because("the OS was not read", os.unknown) + "; a spec names its distribution")
    distros = _allowed(OsSpec, "distro")
    if os.id not in distros:
        raise NotImportable(
            f"{os.pretty_name or os.id} is not a distribution a spec names ({', '.join(distros)})"
        )
    draft.put("os.distro", os.id)
    draft.put("os.version", os.version_id, f"{os.pretty_name or os.id} (/etc/os-release)")
    machine = kernel.machine if isinstance(kernel, Kernel) else None
    if machine in _allowed(OsSpec, "architecture"):
        draft.put("os.architecture", machine)
    else:
        draft.put(
            "os.architecture",
            "x86_64",
            because("uname -m not read", _why(kernel, machine)) + "; x86_64 assumed",
        )


def _why(value: object, machine: str | None) -> str:
    if isinstance(value, Unknown):
        return value.unknown
    return f"{machine} is not x86_64 or aarch64" if machine else "no machine field"


GIVEN = "given with --gpus"


def gpus_section(
    draft: Draft, facts: Facts, catalog: Catalog, given: tuple[str, int | None] | None = None
) -> GpuModel:
    """``gpus:`` (model, count, binding) from nvidia-smi, else lspci's device ids, else ``given``
    (``--gpus MODEL[:COUNT]``: the model, and the count where the facts show none).

    Returns:
        The catalog model of the GPUs.

    Raises:
        NotImportable: No GPU seen, a GPU the catalog does not know, or GPUs of several models (and
            no ``given``), or a ``given`` model the catalog does not have.
    """
    if given is not None:
        model, count = _given(facts, catalog, given)
        draft.put("gpus.model", model.id, f"{GIVEN}: the catalog's {model.name}")
    else:
        model, count = _observed(draft, facts, catalog)
    draft.put("gpus.count", count)
    _binding(draft, facts)
    if count > 1 and (worst := facts.worst_path()) is not None:
        draft.note(
            "gpus.count",
            f"the worst GPU-to-GPU path is {worst} (nvidia-smi topo -m); gpus.max_path: {worst} would "
            "check it",
        )
    return model


def _observed(draft: Draft, facts: Facts, catalog: Catalog) -> tuple[GpuModel, int]:
    seen = _seen_gpus(facts, catalog)
    unknown = [label for label, model in seen if model is None]
    if unknown:
        raise NotImportable(
            f"{unknown[0]} is not a GPU model of the catalog (`provision catalog gpus` lists the ones a "
            "spec names; --gpus MODEL names it)"
        )
    models = {model.id: model for _, model in seen if model is not None}
    if len(models) > 1:
        raise NotImportable(
            f"the GPUs are of {len(models)} models ({', '.join(models)}): a spec names one model"
        )
    model = next(iter(models.values()))
    draft.put("gpus.model", model.id, f"{seen[0][0]}: the catalog's {model.name}")
    return model, len(seen)


def _given(facts: Facts, catalog: Catalog, given: tuple[str, int | None]) -> tuple[GpuModel, int]:
    """The model and count ``--gpus`` names (the count, when left out, is the GPUs the facts show).

    Raises:
        NotImportable: The catalog has no such model, or no count was given and none is seen.
    """
    name, count = given
    model = catalog.gpu(name)
    if model is None:
        raise NotImportable(
            f"--gpus {name}: not a GPU model of the catalog{did_you_mean(name, catalog.gpus)}"
        )
    if count is None:
        try:
            count = len(_seen_gpus(facts, catalog))
        except NotImportable as exc:
            raise NotImportable(f"{exc}; give the count too, --gpus {name}:COUNT") from None
    return model, count


def _seen_gpus(facts: Facts, catalog: Catalog) -> list[tuple[str, GpuModel | None]]:
    """(label, model or None) per GPU: nvidia-smi's names, else lspci's GPU functions.

    Raises:
        NotImportable: Neither shows a GPU.
    """
    if not isinstance(facts.gpus, Unknown) and facts.gpus:
        return [(f'nvidia-smi names GPU {g.index} "{g.name}"', _by_name(g, catalog)) for g in facts.gpus]
    pci = facts.nvidia_pci
    functions = [] if isinstance(pci, Unknown) else [d for d in pci if d.is_gpu]
    if functions:
        return [
            (
                f"lspci shows {d.description or 'an NVIDIA GPU'} [10de:{d.device_id}]",
                catalog.gpu_by_pci_device(f"0x{d.device_id}"),
            )
            for d in functions
        ]
    smi = facts.gpus.unknown if isinstance(facts.gpus, Unknown) else "nvidia-smi lists no GPU"
    lspci = pci.unknown if isinstance(pci, Unknown) else "lspci shows no NVIDIA GPU function"
    raise NotImportable(f"no NVIDIA GPU seen ({smi}; {lspci}); --gpus MODEL:COUNT names them")


def _by_name(gpu: Gpu, catalog: Catalog) -> GpuModel | None:
    """The model nvidia-smi's name names; among several with that name, the one whose memory is
    nearest the GPU's (nvidia-smi's memory.total is within ~1% below the SKU's, gpus.yaml)."""
    found = catalog.gpus_by_smi_name(gpu.name)
    if len(found) <= 1 or gpu.memory_total_mib is None:
        return found[0] if len(found) == 1 else None
    mib = gpu.memory_total_mib
    return min(found, key=lambda m: abs(m.memory_gib * 1024 - mib))


def _binding(draft: Draft, facts: Facts) -> None:
    """``gpus.binding``: vfio-pci when sysfs shows every GPU bound to it (passed through to VMs)."""
    hardware = facts.hardware
    pci = () if isinstance(hardware, Unknown) or isinstance(hardware.gpus, Unknown) else hardware.gpus
    drivers = {g.driver for g in pci if isinstance(g.driver, str)}
    bindings = _allowed(GpuSpec, "binding")
    if drivers == {"vfio-pci"} and "vfio-pci" in bindings:
        draft.put("gpus.binding", "vfio-pci", "sysfs shows every GPU bound to vfio-pci (passed through)")
    elif len(drivers) > 1:
        draft.note("gpus.count", f"the GPUs are bound to different drivers ({', '.join(sorted(drivers))})")


def fabric_manager_section(draft: Draft, facts: Facts) -> None:
    """``fabric_manager: auto``, with what the facts show of an NVSwitch fabric."""
    draft.put("fabric_manager", "auto", f"auto: {facts.nvswitch()[1]}")
