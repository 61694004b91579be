"""MIG layout as state (spec ``gpu.mig``): MIG mode per GPU and its GPU instances, mig-parted style.

Steps (component ``mig``, role ``gpu_settings``):

- the MIG mode: current, pending and target, and what makes the pending mode current: a GPU reset
  (``nvidia-smi -i ID -r``) where nothing holds the GPU, else a reboot: under pass-through
  virtualization NVML offers no reset (NVML-MIG), and a reset fails while ``nvidia_drm`` is loaded
  or nvidia-persistenced, the fabric manager or DCGM keeps the GPU open (MIG-PARTED);
- the layout: every GPU instance destroyed and the spec's created with one compute instance each
  (``nvidia-smi mig -i N -dci``, ``-dgi``, ``-cgi P,P,... -C``), largest first, unless ``nvidia-smi
  mig -lgi`` shows exactly the spec's; instances do not survive a reboot (MIG-START), so the boot
  unit (``components/gpu_unit.py``) creates them again at every boot.

Refused with the reason and its source: MIG on a GPU without MIG (GeForce, workstation cards,
pre-Ampere: MIG-GPUS), a profile the GPU does not have or a layout over its instances or slices
(MIG-PROFILES, ``data/mig.yaml``). MIG commands address a GPU by nvidia-smi index, as the MIG
User Guide's ``nvidia-smi mig -i`` examples do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from provision.catalog import Catalog
from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.gpu_targets import Target, past_count, resolve
from provision.components.steps import noop
from provision.findings import Finding
from provision.spec.models import MigLayout, Spec

if TYPE_CHECKING:
    from provision.catalog.mig import MigCatalog, MigProduct
    from provision.detect.domains.gpu_state import GpuState

KEYS = ("MIG-GPUS", "MIG-PROFILES")
MODE_KEYS = ("MIG-START", "NVML-MIG", "MIG-PARTED")
_TAGS = ("mig",)
REBOOT_TAG = "mig_reboot"


def _catalog() -> MigCatalog:
    from provision.catalog.mig import load_mig

    return load_mig()


class Mig(InstallableComponent):
    """MIG mode and GPU instances per GPU."""

    name = Component.MIG
    spec_section = "gpu"
    facts = ("gpu_state", "gpu_runtime", "gpus")
    role = "gpu_settings"
    tags = (*_TAGS, REBOOT_TAG)
    stage = 1
    reboot_note = "a changed MIG mode takes effect at boot, and the boot unit creates the MIG instances"
    verify_checks = ("mig-layout",)

    def reboots_for(self, step: Step) -> bool:
        return REBOOT_TAG in step.tags

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        if spec.gpu is None or not spec.gpu.mig:
            return ()
        return tuple(model_findings(spec, catalog, _catalog()))

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        if ctx.spec.gpu is None or not ctx.spec.gpu.mig:
            return ()
        return (*self.spec_rules(ctx.spec, ctx.catalog), *machine_findings(ctx))

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        if ctx.spec.gpu is None or not ctx.spec.gpu.mig:
            return ()
        gpus = [g for g in wanted(ctx) if _product(g) is not None or g.target.state is None]
        return [s for g in gpus for s in (mode_step(ctx, g), layout_step(ctx, g))]

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        if ctx.spec.gpu is None or not ctx.spec.gpu.mig:
            return {}
        return role_commands(ctx)


# --- what the spec wants, per GPU ----------------------------------------------------------------


@dataclass(frozen=True)
class WantedMig:
    """One GPU, whether MIG mode is to be on, and its GPU instances (profile -> count)."""

    target: Target
    enabled: bool
    layout: dict[str, int]


def wanted(ctx: PlanContext) -> list[WantedMig]:
    """Each GPU a ``gpu.mig`` group names, with that group's mode and layout (the last group wins;
    two groups naming one GPU differently are refused by :func:`machine_findings`)."""
    section = ctx.spec.gpu
    assert section is not None
    out: dict[str, WantedMig] = {}
    model = _catalog().for_model(ctx.spec.gpus.model)
    for group in section.mig:
        for target in resolve(group.gpus, ctx.facts, ctx.spec.gpus.count)[0]:
            device = _catalog().for_device(target.state.device_id) if target.state is not None else None
            layout = group_layout(group, device or model)
            if layout is not None:  # an unknown name is refused by the findings
                out[target.ident] = WantedMig(
                    target=target, enabled=on(group), layout=dict(sorted(layout.items()))
                )
    return list(out.values())


def on(group: MigLayout) -> bool:
    """Whether the group wants MIG mode on (``config: all-disabled`` is off)."""
    return group.enabled and group.config != "all-disabled"


def group_layout(group: MigLayout, product: MigProduct | None) -> dict[str, int] | None:
    """The group's layout (profile -> count): its own, or its mig-parted name resolved for
    ``product``; None when the name cannot be resolved (no product, or none of that name)."""
    if group.config is None:
        return dict(group.layout)
    if group.config == "all-disabled":
        return {}
    return product.named(group.config) if product is not None else None


def _named_problem(group: MigLayout, product: MigProduct) -> str | None:
    if group.config is None or product.named(group.config) is not None:
        return None
    names = ", ".join(f"all-{p.name.replace('+me', '.me')}" for p in product.profiles)
    return (
        f"config {group.config} is not a mig-parted layout of the {product.name}; its layouts: "
        f"all-balanced, all-enabled, all-disabled, {names}"
    )


def _layout_findings(
    catalog: Catalog, group: MigLayout, product: MigProduct, where: str
) -> Iterator[Finding]:
    named = _named_problem(group, product)
    layout = group_layout(group, product)
    problem = named or (product.layout_problem(layout) if layout is not None else None)
    if problem is not None:
        shown = group.config if group.config else _text(group.layout)
        yield _refuse(catalog, "mig-layout-invalid", f"gpu.mig layout {shown}{where}: {problem}")


def _product(want: WantedMig) -> MigProduct | None:
    state = want.target.state
    return None if state is None else _catalog().for_device(state.device_id)


def model_findings(spec: Spec, catalog: Catalog, mig: MigCatalog) -> Iterator[Finding]:
    """MIG asked of a GPU model without MIG, or a layout it cannot hold (``validate`` runs it too)."""
    section = spec.gpu
    assert section is not None
    product = mig.for_model(spec.gpus.model)
    asked = [g for g in section.mig if on(g)]
    if product is None and asked:
        yield _refuse(
            catalog,
            "mig-unsupported",
            f"gpu.mig: gpus.model {spec.gpus.model} has no MIG provision can plan: "
            f"{_model_reason(spec.gpus.model, catalog, mig)}",
        )
        return
    for group in asked:
        if product is not None:
            yield from _layout_findings(catalog, group, product, "")


def _model_reason(model: str, catalog: Catalog, mig: MigCatalog) -> str:
    row = catalog.gpu(model)
    known = ", ".join(p.name for p in mig.products)
    if row is None:
        return f"not a GPU model of the catalog; MIG products: {known}"
    cc = row.compute_capability
    if model in mig.unsourced:
        return f"the {row.name} is {mig.unsourced[model]}"
    if cc < mig.min_compute_capability:
        return (
            f"the {row.name} is {row.architecture} (compute capability {cc}); MIG starts with Ampere "
            f"data center GPUs (compute capability >= {mig.min_compute_capability})"
        )
    return (
        f"MIG is only on the data center GPUs NVIDIA lists, and the {row.name} is not one of them; "
        f"MIG products: {known}"
    )


def machine_findings(ctx: PlanContext) -> Iterator[Finding]:
    """Per GPU nvidia-smi shows: no MIG on this card, a layout it cannot hold, two groups disagreeing."""
    section = ctx.spec.gpu
    assert section is not None
    seen: dict[str, MigLayout] = {}
    for group in section.mig:
        targets, missing = resolve(group.gpus, ctx.facts, ctx.spec.gpus.count)
        for m in (m for m in missing if not past_count(m, ctx.spec.gpus.count)):
            yield _refuse(
                ctx.catalog, "gpu-settings-unknown-gpu", f"gpu.mig: GPU {m} is not a GPU nvidia-smi shows"
            )
        for target in targets:
            other = seen.setdefault(target.ident, group)
            if other is not group and (on(other), other.layout, other.config) != (
                on(group),
                group.layout,
                group.config,
            ):
                yield _refuse(
                    ctx.catalog,
                    "gpu-settings-overlap",
                    f"gpu.mig: two groups give {target.label} different layouts",
                )
            yield from _card_findings(ctx, target, group)


def _card_findings(ctx: PlanContext, target: Target, group: MigLayout) -> Iterator[Finding]:
    state = target.state
    if state is None or not on(group):
        return
    product = _catalog().for_device(state.device_id)
    if product is None or state.mig_current is None:
        yield _refuse(
            ctx.catalog, "mig-unsupported", f"gpu.mig: {state.name} has no MIG: {_card_reason(ctx, state)}"
        )
        return
    if product is not _catalog().for_model(ctx.spec.gpus.model):
        yield from _layout_findings(ctx.catalog, group, product, f" on {state.name}")


def _card_reason(ctx: PlanContext, state: GpuState) -> str:
    from provision.detect.unknown import Unknown

    gpus = ctx.facts.gpus
    row = None if isinstance(gpus, Unknown) else next((g for g in gpus if g.index == state.index), None)
    cc = row.compute_capability if row is not None else None
    mode = (
        "nvidia-smi -q shows MIG Mode N/A"
        if state.mig_current is None
        else "its PCI device id is no MIG product's"
    )
    floor = _catalog().min_compute_capability
    if cc is not None and cc < floor:
        return f"compute capability {cc} is before Ampere (MIG needs >= {floor}); {mode}"
    return f"{mode} (MIG is only on the data center GPUs NVIDIA lists: A100, A30, H100, H200 and newer)"


def _refuse(catalog: Catalog, rule: str, message: str) -> Finding:
    return Finding(rule=rule, severity="blocker", message=message, source=catalog.cite(KEYS))


def _text(layout: dict[str, int]) -> str:
    return "{" + ", ".join(f"{p}: {n}" for p, n in layout.items()) + "}" if layout else "{} (no instances)"


# --- steps ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModeChange:
    """How one GPU's MIG mode gets to the spec's: the command (None: pending already), and whether
    a reset can make it current or a reboot must (with what holds the GPU)."""

    command: bool
    reboot: bool
    holders: tuple[str, ...]
    why: str


def mode_change(ctx: PlanContext, want: WantedMig) -> ModeChange | None:
    """None when the current mode is the spec's; else what it takes."""
    state = want.target.state
    if state is not None and state.mig_current == want.enabled:
        return None
    runtime = ctx.facts.gpu_runtime
    holders = runtime.holders() if runtime is not None else ()
    if state is not None and state.passthrough:
        why = "the GPU is passed through to this virtual machine, where NVML offers no GPU reset"
    elif runtime is None:
        why = "what holds the GPU was not read (systemd and /sys/module not probed)"
    elif holders:
        verb = "holds" if len(holders) == 1 else "hold"
        why = f"a GPU reset needs the GPU idle, and {', '.join(holders)} {verb} it"
    else:
        why = "nothing holds the GPU: a GPU reset makes the pending mode current"
    reboot = state is None or state.passthrough or runtime is None or bool(holders)
    command = state is None or state.mig_pending != want.enabled
    return ModeChange(command=command, reboot=reboot, holders=holders, why=why)


def _mode_word(value: bool | None) -> str:
    return {True: "enabled", False: "disabled"}.get(value, "unknown")  # type: ignore[arg-type]


def mode_step(ctx: PlanContext, want: WantedMig) -> Step:
    """The MIG mode: current, pending and target, and the reset or reboot that makes it current."""
    state, target = want.target.state, _mode_word(want.enabled)
    current = (
        "not observed"
        if state is None
        else (f"current {_mode_word(state.mig_current)}, pending {_mode_word(state.mig_pending)}")
    )
    change = mode_change(ctx, want)
    if change is None:
        return noop(
            Component.MIG,
            current=current,
            target=f"{want.target.label} MIG {target}",
            reason=f"{want.target.label}: MIG mode {target}",
        )
    then = "reboot" if change.reboot else f"reset the GPU (nvidia-smi -i {_index(want)} -r)"
    first = (
        f"set the pending MIG mode to {target} (nvidia-smi -i {_index(want)} -mig {int(want.enabled)}), then "
        if change.command
        else "the mode is already pending: "
    )
    return Step(
        component=Component.MIG,
        action=Action.CONFIGURE,
        current=current,
        target=f"{want.target.label} MIG {target}",
        tags=(*_TAGS, REBOOT_TAG) if change.reboot else _TAGS,
        reason=f"{want.target.label}: MIG mode {current}, target {target}; {first}{then}: {change.why}",
    )


def _index(want: WantedMig) -> str:
    return str(want.target.state.index) if want.target.state is not None else want.target.ident


def observed_layout(ctx: PlanContext, want: WantedMig) -> dict[str, int] | str:
    """The GPU's instances (profile -> count), or why they are not known."""
    from provision.detect.unknown import Unknown

    runtime, state = ctx.facts.gpu_runtime, want.target.state
    if runtime is None:
        return "not probed"
    if isinstance(runtime.mig, Unknown):
        return runtime.mig.unknown
    return runtime.mig.layout(state.index) if state is not None else "GPU not observed"


def _whole(want: WantedMig) -> bool:
    """A GPU the spec wants whole that nvidia-smi shows with MIG mode off: it has no instances."""
    state = want.target.state
    return not want.enabled and state is not None and state.mig_current is False


def layout_step(ctx: PlanContext, want: WantedMig) -> Step:
    """The GPU instances, made exactly the spec's unless ``nvidia-smi mig -lgi`` shows them."""
    label = f"{want.target.label} MIG layout"
    if _whole(want):
        return noop(Component.MIG, target=label, reason=f"{want.target.label}: a whole GPU (MIG mode off)")
    have = observed_layout(ctx, want)
    if have == want.layout:
        return noop(
            Component.MIG,
            current=_text(want.layout),
            target=label,
            reason=f"{want.target.label}: MIG instances {_text(want.layout)} as the spec sets them",
        )
    change = mode_change(ctx, want)
    when = (
        "now, before MIG mode goes off"
        if not want.enabled
        else "by the boot unit after the reboot"
        if change is not None and change.reboot
        else "after the reset"
        if change is not None
        else "now"
    )
    verb = "destroy the GPU instances" + (f" and create {_text(want.layout)}" if want.layout else "")
    return Step(
        component=Component.MIG,
        action=Action.CONFIGURE,
        current=have if isinstance(have, str) else _text(have),
        target=label,
        tags=_TAGS,
        reason=f"{want.target.label}: {verb} {when} (nvidia-smi mig -dci, -dgi, -cgi ... -C)",
    )


# --- argv lists ---------------------------------------------------------------------------------


def create_profiles(want: WantedMig) -> list[str]:
    """The profiles to create, one per instance, largest compute first (placement packs better)."""
    product = _product(want)
    size = {p.name: (p.compute, p.memory) for p in product.profiles} if product else {}
    names = sorted(want.layout, key=lambda n: size.get(n, (0, 0)), reverse=True)
    return [n for n in names for _ in range(want.layout[n])]


def layout_argvs(index: str, want: WantedMig) -> tuple[list[list[str]], list[list[str]]]:
    """(destroy, create) argv lists for one GPU: destroying fails harmlessly where none exist."""
    base = ["nvidia-smi", "mig", "-i", index]
    destroy = [[*base, "-dci"], [*base, "-dgi"]]
    profiles = create_profiles(want)
    return destroy, ([[*base, "-cgi", ",".join(profiles), "-C"]] if profiles else [])


def role_commands(ctx: PlanContext) -> dict[str, Any]:
    """The role's MIG variables: destroy, mode, reset and create argv lists, from the changing steps
    (the role destroys first: ``nvidia-smi -mig 0`` refuses a GPU that still has instances)."""
    modes, resets, destroys, creates = [], [], [], []
    for want in wanted(ctx):
        if want.target.state is not None and _product(want) is None:
            continue
        index = _index(want)
        change = mode_change(ctx, want)
        if change is not None and change.command:
            modes.append(["nvidia-smi", "-i", index, "-mig", str(int(want.enabled))])
        if change is not None and not change.reboot:
            resets.append(["nvidia-smi", "-i", index, "-r"])
        have = observed_layout(ctx, want)
        destroy, create = layout_argvs(index, want)
        if not want.enabled and not _whole(want) and have != {}:
            destroys += destroy  # MIG mode goes off only once its instances are gone
        elif want.enabled and (change is None or not change.reboot) and have != want.layout:
            destroys += destroy
            creates += create
    return {
        "mig_mode_commands": modes,
        "mig_reset_commands": resets,
        "mig_destroy_commands": destroys,
        "mig_create_commands": creates,
    }


def boot_argvs(ctx: PlanContext) -> list[tuple[bool, list[str]]]:
    """What the boot unit runs for MIG: (may fail, argv) per command, for every MIG-enabled GPU."""
    out: list[tuple[bool, list[str]]] = []
    if ctx.spec.gpu is None:
        return out
    for want in wanted(ctx):
        if not want.enabled or (want.target.state is not None and _product(want) is None):
            continue
        destroy, create = layout_argvs(_index(want), want)
        out += [(True, a) for a in destroy] + [(False, a) for a in create]
    return out
