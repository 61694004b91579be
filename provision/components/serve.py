"""Serving a model with vLLM: its memory fit, its wheel and torch pin, and the server's systemd unit.

The spec's ``serve:`` section is checked before anything is installed (:meth:`Serve.spec_rules`, which
``validate`` runs too): vLLM's torch pin against ``python.torch``, its CUDA build against
``python.cuda_variant`` and the driver floor, Python against Requires-Python, vLLM's tensor-parallel
rules against the model's heads, and the memory-fit arithmetic of :mod:`provision.serving.fit` against
the GPUs of ``gpus:``. The plan shows that arithmetic as a step; a model that does not fit is refused
with what would fit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from provision.catalog import Catalog
from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.python_env import torch_constraints
from provision.components.steps import noop
from provision.detect.unknown import Unknown
from provision.findings import Finding
from provision.spec.models import ServeSpec, Spec
from provision.unknown import because

if TYPE_CHECKING:
    from provision.catalog.serving import ServingData, VllmRelease
    from provision.detect.domains.service import UnitFile
    from provision.serving.fit import FitRequest
    from provision.serving.unit import ServerConfig

# provision.serving.fit and .unit are imported where they are used: only a spec that serves needs
# them, and every command that reads a spec imports this component (~3 ms).

_TAGS = ("serve",)


class Serve(InstallableComponent):
    """vLLM in the spec's venv and its OpenAI-compatible server (steps ``serve``)."""

    name = Component.SERVE
    spec_section = "serve"
    facts = ("venv", "vllm_unit")
    role = "vllm_serve"
    tags = _TAGS
    verify_checks = ("serve-health", "serve-models", "serve-completion", "serve-tokens-per-second")
    observer = "provision.verify.checks_serve:OBSERVER"

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        if spec.serve is None:
            return ()
        from provision.catalog.serving import load_serving  # only a spec that serves reads it

        return tuple(serve_findings(spec, spec.serve, catalog, load_serving()))

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        # The planner runs findings(), validate runs spec_rules(): the same refusals in both.
        return self.spec_rules(ctx.spec, ctx.catalog)

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        serve = ctx.spec.serve
        if serve is None:
            return ()
        from provision.catalog.serving import load_serving

        data = load_serving()
        fit = fit_step(ctx.spec, serve, ctx.catalog, data)
        return (*((fit,) if fit else ()), wheel_step(ctx, serve, data), unit_step(ctx, serve, data))

    def role_runs(self, ctx: PlanContext) -> bool:
        return ctx.spec.serve is not None and ctx.spec.python is not None

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        serve, py = ctx.spec.serve, ctx.spec.python
        if serve is None or py is None:
            return {}
        from provision.catalog.serving import load_serving
        from provision.serving.unit import UNIT_PATH, unit_text

        data = load_serving()
        return {
            "venv": py.venv,
            "requirement": f"vllm=={serve.vllm}",
            "constraints": list(torch_constraints(py, ctx.facts)),
            "index_url": str(serve.index_url) if serve.index_url else "",
            "unit_path": UNIT_PATH,
            "unit": unit_text(server_config(ctx.spec, serve), data),
        }


def tensor_parallel(spec: Spec, serve: ServeSpec) -> int:
    """``serve.tensor_parallel_size``, default the GPU count."""
    return serve.tensor_parallel_size or spec.gpus.count


def server_config(spec: Spec, serve: ServeSpec) -> ServerConfig:
    """The server's settings from the spec (TP defaults to the GPU count, context to the model's)."""
    from provision.serving.unit import ServerConfig

    arch = serve.architecture
    return ServerConfig(
        venv=spec.python.venv if spec.python is not None else "/nonexistent",
        model=serve.model,
        served_name=serve.served_model_name or serve.model,
        host=serve.host,
        port=serve.port,
        tensor_parallel=tensor_parallel(spec, serve),
        utilization=serve.gpu_memory_utilization,
        max_context=serve.max_context or (arch.max_context if arch is not None else None),
        sequences=serve.sequences,
        weights=serve.weights,
        kv_cache_dtype=serve.kv_cache_dtype,
        restart=serve.restart,
    )


def fit_request(spec: Spec, serve: ServeSpec, catalog: Catalog) -> FitRequest | None:
    """The memory-fit question of the spec, None when the GPU model or the architecture is unknown."""
    from provision.serving.fit import FitRequest

    gpu = catalog.gpu(spec.gpus.model)
    if gpu is None or serve.architecture is None:
        return None
    tp = tensor_parallel(spec, serve)
    return FitRequest(
        arch=serve.architecture,
        weights=serve.weights,
        kv_cache_dtype=serve.kv_cache_dtype,
        max_context=serve.max_context or serve.architecture.max_context,
        sequences=serve.sequences,
        tensor_parallel=tp,
        gpu_count=spec.gpus.count,
        gpu_gib=gpu.memory_gib,
        gpu_name=gpu.id,
        utilization=serve.gpu_memory_utilization,
    )


def serve_findings(spec: Spec, serve: ServeSpec, catalog: Catalog, data: ServingData) -> Iterator[Finding]:
    """Every refusal of ``serve:`` that reads only the spec and the catalog."""
    yield from _version_findings(spec, serve, catalog, data)
    yield from _parallel_findings(spec, serve, catalog, data)


def _finding(catalog: Catalog, rule: str, message: str, keys: tuple[str, ...]) -> Finding:
    return Finding(rule=rule, severity="blocker", message=message, source=catalog.cite(keys))


def _version_findings(spec: Spec, serve: ServeSpec, catalog: Catalog, data: ServingData) -> Iterator[Finding]:
    release = data.vllm(serve.vllm)
    if release is None:
        known = ", ".join(str(r.version) for r in data.vllm_releases)
        yield _finding(
            catalog,
            "serve-vllm-unknown",
            f"serve.vllm {serve.vllm} is not in the catalog; known: {known}",
            ("VLLM-PYPI",),
        )
        return
    py = spec.python
    if py is None or py.torch is None:
        yield _finding(
            catalog,
            "serve-needs-python",
            f"serve needs python.venv with python.torch {release.torch} and python.cuda_variant "
            f"{release.cuda_variant} (vLLM {release.version} pins torch=={release.torch})",
            release.source,
        )
        return
    yield from _pin_findings(spec, release, catalog)


def _pin_findings(spec: Spec, release: VllmRelease, catalog: Catalog) -> Iterator[Finding]:
    from provision.catalog.serving import load_serving

    py = spec.python
    assert py is not None and py.torch is not None
    if py.torch != release.torch:
        fitting = ", ".join(str(r.version) for r in load_serving().vllm_releases if r.torch == py.torch)
        yield _finding(
            catalog,
            "serve-vllm-torch-pin",
            f"vLLM {release.version} requires torch=={release.torch}, the spec's python.torch is "
            f"{py.torch}; set python.torch {release.torch}"
            + (f" or serve.vllm one of {fitting}" if fitting else ""),
            release.source,
        )
    if py.cuda_variant != release.cuda_variant:
        yield _finding(
            catalog,
            "serve-vllm-cuda-variant",
            f"vLLM {release.version}'s PyPI wheel is built for {release.cuda_variant}, the spec's "
            f"python.cuda_variant is {py.cuda_variant}; its compiled kernels need torch of the same CUDA "
            f"build: set python.cuda_variant {release.cuda_variant}",
            release.source,
        )
    if not release.python_allows(str(py.interpreter)):
        yield _finding(
            catalog,
            "serve-vllm-python",
            f"vLLM {release.version} requires Python {','.join(release.python)}, python.interpreter is "
            f"{py.interpreter}",
            release.source,
        )
    yield from _driver_floor(spec, release, catalog)


def _driver_floor(spec: Spec, release: VllmRelease, catalog: Catalog) -> Iterator[Finding]:
    cuda = catalog.variant_cuda(release.cuda_variant)
    family = catalog.cuda_family(cuda.major)
    if family is not None and spec.driver.branch < family.min_branch:
        yield _finding(
            catalog,
            "serve-vllm-driver-floor",
            f"vLLM {release.version} is built for CUDA {cuda} ({release.cuda_variant}), which needs driver "
            f"branch >= {family.min_branch}; driver.branch is {spec.driver.branch}",
            release.source + family.source,
        )


def _parallel_findings(
    spec: Spec, serve: ServeSpec, catalog: Catalog, data: ServingData
) -> Iterator[Finding]:
    from provision.serving.fit import tp_problem, valid_tp_sizes

    arch, tp, keys = serve.architecture, tensor_parallel(spec, serve), data.tensor_parallel.source
    if tp > spec.gpus.count:
        yield _finding(
            catalog,
            "serve-tp-gpus",
            f"serve.tensor_parallel_size {tp} is more than the {spec.gpus.count} GPUs of gpus.count",
            keys,
        )
        return
    if arch is None:
        return
    if (why := tp_problem(arch, tp)) is not None:
        sizes = ", ".join(map(str, valid_tp_sizes(arch, spec.gpus.count)))
        yield _finding(
            catalog,
            "serve-tp-heads",
            f"vLLM refuses this model at tensor_parallel_size {tp}: {why}; sizes it accepts on "
            f"{spec.gpus.count} GPUs: {sizes}",
            keys,
        )
        return
    if serve.max_context is not None and serve.max_context > arch.max_context:
        yield _finding(
            catalog,
            "serve-context-too-long",
            f"serve.max_context {serve.max_context} is longer than the model's {arch.max_context} "
            f"(max_position_embeddings in {arch.source}); vLLM refuses it",
            ("VLLM-SERVE", "HF-CONFIG"),
        )
        return
    yield from _fit_findings(spec, serve, catalog, data)


def _fit_findings(spec: Spec, serve: ServeSpec, catalog: Catalog, data: ServingData) -> Iterator[Finding]:
    from provision.serving.fit import alternatives, compute_fit

    req = fit_request(spec, serve, catalog)
    if req is None:
        return
    fit = compute_fit(req, data)
    if fit.fits:
        return
    other = alternatives(req, data)
    hint = f"; would fit: {'; '.join(other)}" if other else "; nothing close fits these GPUs"
    keys = tuple(dict.fromkeys((*data.weight(req.weights).source, *data.runtime_allowance.source, "VLLM-TP")))
    yield _finding(
        catalog,
        "serve-memory-fit",
        f"{serve.model} does not fit {req.gpu_count} x {req.gpu_name}: " + "; ".join(fit.lines) + hint,
        keys,
    )


def fit_step(spec: Spec, serve: ServeSpec, catalog: Catalog, data: ServingData) -> Step | None:
    """A no-op step carrying the memory-fit arithmetic (None when it cannot be computed)."""
    from provision.serving.fit import compute_fit, tp_problem

    arch = serve.architecture
    req = fit_request(spec, serve, catalog)
    if req is None or arch is None or tp_problem(arch, req.tensor_parallel) is not None:
        return None
    fit = compute_fit(req, data)
    return noop(
        Component.SERVE,
        current=f"{req.gpu_count} x {req.gpu_name}",
        target=f"{serve.model} ({serve.weights}, {req.max_context:,} tokens x {req.sequences})",
        reason="memory fit: " + "; ".join(fit.lines),
    )


def wheel_step(ctx: PlanContext, serve: ServeSpec, data: ServingData) -> Step:
    """Install ``vllm==<serve.vllm>`` into the venv unless it is there at that version."""
    from provision.detect.facts import Venv

    venv = ctx.facts.venv
    have = venv.distributions.get("vllm") if isinstance(venv, Venv) else None
    if have is not None and _same(have, serve.vllm):
        return noop(
            Component.SERVE,
            current=f"vllm {have}",
            target=f"vllm {serve.vllm}",
            reason=f"vllm {have} is installed in the venv",
        )
    release = data.vllm(serve.vllm)
    pin = f", torch held at {release.torch} by a pip constraint" if release else ""
    return Step(
        component=Component.SERVE,
        action=_change(have, serve.vllm),
        current=f"vllm {have}" if have else "absent",
        target=f"vllm {serve.vllm}",
        packages=(f"vllm=={serve.vllm}",),
        tags=_TAGS,
        reason=f"install vLLM {serve.vllm} into the venv{pin}",
    )


def _change(have: str | None, want: Version) -> Action:
    """install when absent (or unreadable), else upgrade or downgrade towards ``want``."""
    try:
        older = have is not None and Version(have) < want
    except InvalidVersion:
        return Action.INSTALL
    return Action.INSTALL if have is None else Action.UPGRADE if older else Action.DOWNGRADE


def _same(have: str, want: Version) -> bool:
    try:
        return Version(have) == want
    except InvalidVersion:
        return False


def unit_step(ctx: PlanContext, serve: ServeSpec, data: ServingData) -> Step:
    """Write the server's systemd unit (and restart the service) unless the unit on disk is the same."""
    from provision.detect.domains.service import UnitFile
    from provision.serving.unit import UNIT_PATH, server_argv, unit_text

    cfg = server_config(ctx.spec, serve)
    text, argv = unit_text(cfg, data), server_argv(cfg, data)
    current = ctx.facts.vllm_unit
    if isinstance(current, UnitFile) and current.present and current.text.rstrip("\n") == text.rstrip("\n"):
        return noop(
            Component.SERVE,
            current=UNIT_PATH,
            target=UNIT_PATH,
            reason=f"{UNIT_PATH} already runs {' '.join(argv[1:3])} as the spec says",
        )
    return Step(
        component=Component.SERVE,
        action=Action.CONFIGURE,
        current=_unit_state(current),
        target=UNIT_PATH,
        tags=_TAGS,
        reason=f"write {UNIT_PATH} (vLLM's OpenAI-compatible server on {serve.host}:{serve.port}) and "
        "enable and (re)start it",
    )


def _unit_state(current: UnitFile | Unknown | None) -> str:
    if current is None:
        return "not probed"
    if isinstance(current, Unknown):
        return because("unknown", current.unknown)
    return "another unit" if current.present else "absent"
