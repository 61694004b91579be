"""What verify observes on a host for each component, one host-probe job for all, one parse each.

A component that verify must read on the host itself (vLLM's server, the monitoring, the
container runtime) names an :class:`Observer` (``InstallableComponent.observer``,
``module:attribute``): the key
its reading is kept under in ``VerifyInputs.observed``, the run model a saved ``inputs.json``
holds, the :mod:`provision.verify.hostprobe` part it asks for a spec (None: nothing to ask), the
pure parse of that part's answer, and the checks that judge the run. :func:`host_job` joins the
parts of every observer into one job; a local verify runs it in process (:func:`collect`), remote
verify copies it and the program to each host and runs it there (these services often listen on
the host's loopback only, and a container must run where the GPUs are). :func:`observed_from`
parses the answer the same way for both; :func:`observed_failed` gives every asked part the reason
when the probe gave no answer, so those checks fail with it instead of passing or skipping.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from provision.detect.unknown import Unknown
from provision.models import Frozen
from provision.spec.models import Spec
from provision.verify import hostprobe

if TYPE_CHECKING:
    from provision.verify.models import CheckResult

R = TypeVar("R", bound=Frozen)
Observed = dict[str, Any]
"""Observer key -> its run model, or the Unknown saying why it could not be read
(``VerifyInputs.observed``)."""


@dataclass(frozen=True)
class Observer(Generic[R]):
    """What verify reads on a host for one component, and the checks over it.

    Attributes:
        key: Its name in ``VerifyInputs.observed`` and in the host-probe job's ``parts``
            (``serve``, ``monitoring``); the spec section's name.
        model: The run type a saved ``inputs.json`` holds under ``key``.
        job: The host-probe part for a spec (``{"units", "requests", "commands"}``,
            :mod:`provision.verify.hostprobe`), None when the spec asks nothing of it.
        parse: That part's answer as the run (pure; never raises: a missing piece is its reason).
        checks: The checks that judge the run, in report order (each takes the check
            :class:`~provision.verify.context.Context`, which imports the inputs this module types).
    """

    key: str
    model: type[R]
    job: Callable[[Spec], dict[str, Any] | None]
    parse: Callable[[Spec, Any], R]
    checks: tuple[Callable[[Any], list[CheckResult]], ...]

    def run(self, observed: Mapping[str, Any]) -> R | Unknown | None:
        """Its run in ``VerifyInputs.observed``: the model, why it could not be read, or None when
        the inputs hold none (the spec asks nothing, or a file saved before verify read it)."""
        found = observed.get(self.key)
        return found if isinstance(found, self.model | Unknown) else None


@cache
def observers() -> tuple[Observer[Any], ...]:
    """Every component's observer, in registry order (the order of their checks in a report)."""
    from provision.components.registry import COMPONENTS

    return tuple(resolve(c.observer) for c in COMPONENTS if c.observer is not None)


def resolve(name: str) -> Observer[Any]:
    """The observer a component names as ``module:attribute``.

    Raises:
        TypeError: The name is not an :class:`Observer` (a programming error).
    """
    module, _, attribute = name.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    if not isinstance(found, Observer):
        raise TypeError(f"{name} is not an Observer")
    return found


def typed(observed: Mapping[str, Any]) -> Observed:
    """Saved or fresh readings as their run models (``{"unknown": why}`` as Unknown, None left
    out: nothing read); a key no observer has (a file of a newer release) is kept as it was."""
    by_key = {o.key: o for o in observers()}
    out: Observed = {}
    for key, value in observed.items():
        observer = by_key.get(key)
        if value is None:
            continue
        if observer is None or isinstance(value, observer.model | Unknown):
            out[key] = value
        elif isinstance(value, dict) and set(value) == {"unknown"}:
            out[key] = Unknown.model_validate(value)
        else:
            out[key] = observer.model.model_validate(value)
    return out


def host_job(spec: Spec) -> dict[str, Any] | None:
    """The host-probe job for every observer the spec asks something of; None when none does."""
    parts = {o.key: part for o in observers() if (part := o.job(spec)) is not None}
    return {"parts": parts} if parts else None


def deadline_s(job: dict[str, Any]) -> int:
    """Seconds the whole job may take: every request's and command's own timeout, systemctl's per
    part, and 30 s for starting the interpreter (the remote task's ``timeout``)."""
    total = 0.0
    for part in job["parts"].values():
        total += sum(float(r["timeout"]) for r in (part.get("requests") or {}).values())
        total += sum(float(c["timeout"]) for c in part.get("commands") or ())
        total += hostprobe.SYSTEMCTL_TIMEOUT_S if part.get("units") else 0.0
    return int(total) + 30


def observed_from(spec: Spec, answer: Any) -> Observed:
    """The runs in a host-probe answer to :func:`host_job` (pure; never raises).

    An answer that is not a JSON object, or the program's own ``{"error": ...}``, is every asked
    part's reason (:func:`observed_failed`).
    """
    if not isinstance(answer, dict) or "error" in answer:
        said = answer.get("error") if isinstance(answer, dict) else None
        return observed_failed(spec, str(said or "the host probe's output is not a JSON object"))
    got = answer.get("parts")
    parts: dict[str, Any] = got if isinstance(got, dict) else {}
    return {o.key: o.parse(spec, parts.get(o.key)) for o in observers() if o.job(spec) is not None}


def observed_failed(spec: Spec, reason: str) -> Observed:
    """``reason`` for every part the spec asks (the probe did not run or gave no answer)."""
    return {o.key: Unknown(unknown=reason) for o in observers() if o.job(spec) is not None}


def collect(spec: Spec) -> Observed:
    """Ask this machine (the host probe in process)."""
    job = host_job(spec)
    if job is None:
        return {}
    return observed_from(spec, hostprobe.run_job(job))
