"""The Python environment: a virtual environment and its wheels.

The torch requirement is pinned with its local variant tag (``torch==2.11.0+cu130``)
and installed from the variant's own index only, so PyPI's default CUDA variant
is never taken by accident (FF-09; PyTorch wheel index ``https://download.pytorch.org/whl/<variant>``).
The projects PyTorch publishes per variant (torchvision, torchaudio: catalog ``variant_projects``)
among the extra packages are installed with torch from that index. Every pip call into the venv
runs with a constraints file holding the venv's torch build (:func:`torch_constraints`), so that
an extra package can never replace the variant torch with PyPI's CPU or other-CUDA wheel: pip
refuses the conflict instead (pip "Constraints Files", https://pip.pypa.io/en/stable/user_guide/#constraints-files).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from provision.catalog import Catalog
from provision.components.base import Action, Built, Component, InstallableComponent, PlanContext, Step
from provision.components.steps import noop
from provision.findings import Finding
from provision.spec.models import PythonSpec, Spec
from provision.unknown import because
from provision.versions import DottedVersion

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from provision.detect.facts import Facts, NoVenv, Torch, Venv

_TAGS = ("python",)


class PythonEnv(InstallableComponent):
    """The venv and its wheels (steps ``python_venv`` and ``python_wheels``)."""

    name = Component.PYTHON_VENV
    spec_section = "python"
    facts = ("venv", "torch")
    role = "python_env"
    tags = _TAGS
    verify_checks = ("torch-version", "torch-arch", "torch-cuda-driver")

    def plan(self, ctx: PlanContext) -> Iterable[Built]:
        py = ctx.spec.python
        if py is None:
            return ()
        removal = foreign_wheels_step(py, ctx.facts)
        return (venv_step(py, ctx.facts), *((removal,) if removal else ()), wheels_step(py, ctx.facts))

    def spec_rules(self, spec: Spec, catalog: Catalog) -> Iterable[Finding]:
        return torch_in_packages(spec.python)

    def findings(self, ctx: PlanContext) -> Iterable[Finding]:
        # The planner runs findings(), validate runs spec_rules(): the same refusal in both.
        return self.spec_rules(ctx.spec, ctx.catalog)

    def role_runs(self, ctx: PlanContext) -> bool:
        return ctx.spec.python is not None

    def role_vars(self, ctx: PlanContext) -> dict[str, Any]:
        py = ctx.spec.python
        if py is None:
            return {}
        removal = next(
            (s for s in ctx.steps() if s.component is Component.PYTHON_WHEELS and s.action is Action.REMOVE),
            None,
        )
        variables = python_extravars(py, ctx.catalog, ctx.facts)
        variables["uninstall"] = list(removal.packages) if removal is not None else []
        variables["reinstall"] = bool(_half_installed(py, ctx.facts))
        return variables


def venv_step(py: PythonSpec, facts: Facts) -> Step | Finding:
    """Create the venv unless one with the spec's interpreter exists (never deletes one); repair one
    whose interpreter or pip is missing (an interrupted creation) by running ``venv`` over it again."""
    from provision.detect.facts import Venv

    found = _venv_python(py, facts)
    venv = spec_venv(py, facts)
    missing = venv.missing_parts() if isinstance(venv, Venv) else ()
    if found is not None and missing:
        return Step(
            component=Component.PYTHON_VENV,
            action=Action.INSTALL,
            current=f"incomplete (no {', no '.join(missing)})",
            target=f"{py.venv} (Python {py.interpreter})",
            tags=_TAGS,
            reason=f"repair the virtual environment {py.venv}: python{py.interpreter} -m venv over it "
            "again restores the interpreter and pip and keeps the installed wheels",
        )
    if found is None:
        why = unobserved(py, facts)
        return Step(
            component=Component.PYTHON_VENV,
            action=Action.INSTALL,
            current="absent" if why is None else because("not observed", why),
            target=f"{py.venv} (Python {py.interpreter})",
            tags=_TAGS,
            reason=f"create the virtual environment {py.venv} with python{py.interpreter}"
            + ("" if why is None else "; detection did not read it, and venv over an existing one keeps it"),
        )
    if DottedVersion(".".join(map(str, found.parts[:2]))) != py.interpreter:
        return Finding(
            rule="venv-python-mismatch",
            severity="blocker",
            source="provision planner",
            message=f"{py.venv} uses Python {found}, the spec wants {py.interpreter}; remove it "
            "or choose another python.venv (provision never deletes an environment)",
        )
    return noop(
        Component.PYTHON_VENV,
        current=f"Python {found}",
        target=f"Python {py.interpreter}",
        reason=f"{py.venv} exists with Python {found}",
    )


def spec_venv(py: PythonSpec, facts: Facts) -> Venv | NoVenv | None:
    """What the venv probe read of the spec's venv: :class:`~provision.detect.facts.Venv`, or
    :class:`~provision.detect.facts.NoVenv` when it saw none there; None when it did not read it (not
    probed, the probe failed) or read another path (a capture made for another spec)."""
    from provision.detect.facts import NoVenv, Venv

    venv = facts.venv
    if isinstance(venv, (Venv, NoVenv)) and venv.path in ("", py.venv):  # "": captures without the path
        return venv
    return None


def spec_torch(py: PythonSpec, facts: Facts) -> Torch | None:
    """torch as its probe read it in the spec's venv; None when unread or read in another venv."""
    from provision.detect.facts import Torch

    torch = facts.torch
    return torch if isinstance(torch, Torch) and torch.venv == py.venv else None


def unobserved(py: PythonSpec, facts: Facts) -> str | None:
    """Why detection knows nothing of the spec's venv, or None when it read it, or saw it absent, or
    torch's probe read it. The plan then says "not observed" where it would say "absent" (it still
    installs: venv and pip over an existing environment keep what is there)."""
    from provision.detect.facts import Unknown

    if spec_venv(py, facts) is not None or spec_torch(py, facts) is not None:
        return None
    venv = facts.venv
    if isinstance(venv, Unknown):
        return venv.unknown
    return f"the facts read the venv {venv.path}, not {py.venv}"


def _venv_python(py: PythonSpec, facts: Facts) -> DottedVersion | None:
    from provision.detect.facts import Venv

    venv, torch = spec_venv(py, facts), spec_torch(py, facts)
    if isinstance(venv, Venv) and venv.python is not None:
        return venv.python
    if torch is not None and torch.python:
        return DottedVersion(torch.python.split()[0])
    return None


def foreign_wheels_step(py: PythonSpec, facts: Facts) -> Step | None:
    """Remove the venv's CUDA wheels built for another CUDA major than torch (one CUDA world per
    venv: the ``one-cuda-world`` invariant); None when there are none or torch is unread."""
    from provision.detect.facts import Venv
    from provision.invariants.cuda_world import foreign_wheels, torch_cuda

    torch, venv = spec_torch(py, facts), spec_venv(py, facts)
    built = torch_cuda(torch) if torch is not None else None
    if built is None or not isinstance(venv, Venv):
        return None
    foreign = foreign_wheels(venv, built)
    if not foreign:
        return None
    return Step(
        component=Component.PYTHON_WHEELS,
        action=Action.REMOVE,
        current=", ".join(f"{n} {venv.distributions[n]}" for n in foreign),
        target="absent",
        packages=foreign,
        tags=_TAGS,
        reason=f"torch is built for CUDA {built}; wheels of another CUDA major break its import or first "
        "kernel (PyTorch cpp_extension's CUDA check refuses a major apart)",
    )


def requirements(py: PythonSpec) -> tuple[str, ...]:
    """pip requirements: torch pinned with its variant tag, then the extra packages."""
    torch = (f"torch=={py.torch}+{py.cuda_variant}",) if py.torch is not None else ()
    return torch + py.packages


def wheels_step(py: PythonSpec, facts: Facts) -> Step:
    """Install the requirements that the venv does not satisfy yet."""
    have = _distributions(py, facts)
    missing = _unsatisfied(py, have)
    if not missing:
        return noop(
            Component.PYTHON_WHEELS,
            current=_describe(have),
            target=", ".join(requirements(py)),
            reason="every requirement is already satisfied in the venv",
        )
    broken = _half_installed(py, facts)
    return Step(
        component=Component.PYTHON_WHEELS,
        action=Action.INSTALL,
        current=_describe(have) or ("half-installed " + ", ".join(broken) if broken else _absent(py, facts)),
        target=", ".join(requirements(py)),
        packages=missing,
        tags=_TAGS,
        reason="install the wheels (torch from its pinned variant index only)"
        + ("; reinstall over the half-installed ones (metadata and files disagree)" if broken else ""),
    )


def _absent(py: PythonSpec, facts: Facts) -> str:
    why = unobserved(py, facts)
    return "absent" if why is None else because("not observed", why)


def _distributions(py: PythonSpec, facts: Facts) -> dict[str, str]:
    """Installed distributions; torch's version from its generated version.py, which carries the
    variant tag (``2.11.0+cu130``) even where the dist-info name does not (PyPI's default wheel).

    torch's files count only with a complete ``torch`` dist-info beside them when the venv probe
    read the dist-infos (files without metadata are an interrupted install, not an installed torch).
    """
    from provision.detect.facts import Venv

    found = spec_venv(py, facts)
    venv = found if isinstance(found, Venv) else None
    have = dict(venv.distributions) if venv else {}
    metadata_agrees = venv is None or venv.interpreter is None or "torch" in venv.distributions
    if (torch := spec_torch(py, facts)) is not None and metadata_agrees:
        have["torch"] = torch.version
    return have


def _half_installed(py: PythonSpec, facts: Facts) -> tuple[str, ...]:
    """Requirements whose distribution is half-installed in the venv (pip must reinstall over it)."""
    from provision.detect.facts import Venv

    venv = spec_venv(py, facts)
    broken = venv.incomplete if isinstance(venv, Venv) else {}
    return tuple(text for text, name, _ in _wanted(py) if name in broken)


def _unsatisfied(py: PythonSpec, have: dict[str, str]) -> tuple[str, ...]:
    """``requirements(py)`` that ``have`` (canonical name -> version) does not satisfy, in order."""
    return tuple(text for text, name, req in _wanted(py) if not _satisfied(text, have.get(name), req))


def _wanted(py: PythonSpec) -> list[tuple[str, str, Requirement | None]]:
    """``requirements(py)``, each with its distribution's canonical name (PEP 503) and its parsed
    form: None for the torch pin.

    The torch pin is the exact version with its local variant tag, which PEP 440 matches as a whole
    (https://peps.python.org/pep-0440/#version-matching): it is compared as versions, without
    parsing the requirement (packaging.requirements costs 15-60 ms to import; it is loaded only for
    the spec's extra ``python.packages``).
    """
    extra: list[tuple[str, Requirement | None]] = []
    if py.packages:
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name

        extra = [(canonicalize_name(req.name), req) for req in map(Requirement, py.packages)]
    parsed = ([("torch", None)] if py.torch is not None else []) + extra
    return [(text, name, req) for text, (name, req) in zip(requirements(py), parsed, strict=True)]


def _satisfied(text: str, version: str | None, req: Requirement | None) -> bool:
    """Whether the installed ``version`` (None: not installed) satisfies the requirement ``text``
    (``req`` parsed, None for the torch pin)."""
    from packaging.version import InvalidVersion, Version

    if version is None:
        return False
    try:
        if req is None:
            return Version(version) == Version(text.removeprefix("torch=="))
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _describe(have: dict[str, str]) -> str:
    return f"torch {have['torch']}" if "torch" in have else ""


def python_extravars(py: PythonSpec, catalog: Catalog, facts: Facts) -> dict[str, Any]:
    """Variables for the python role: interpreter, venv, torch index, the requirements installed
    from it (torch and the variant projects among the extras), the other extras, and the
    constraints every pip call holds."""
    index = (
        str(py.index_url)
        if py.index_url
        else (catalog.index_url(py.cuda_variant) if py.cuda_variant else None)
    )
    variant, others = split_extras(py, catalog)
    torch = requirements(py)[:1] if py.torch is not None else ()
    from_index = (*torch, *variant) if index else ()
    return {
        "interpreter": f"python{py.interpreter}",
        "venv": py.venv,
        "torch_requirements": list(from_index),
        "torch_index_url": index or "",
        "packages": list(others if index else py.packages),
        "constraints": list(torch_constraints(py, facts)),
    }


def torch_constraints(py: PythonSpec, facts: Facts) -> tuple[str, ...]:
    """pip constraints holding the venv's torch build: the spec's torch with its variant tag, else the
    torch installed in the venv (its version carries the tag, ``2.11.0+cu130``); empty when there is
    neither (no torch to hold)."""
    if py.torch is not None:
        return (f"torch=={py.torch}+{py.cuda_variant}",)
    torch = spec_torch(py, facts)
    return (f"torch=={torch.version}",) if torch is not None and torch.version else ()


def split_extras(py: PythonSpec, catalog: Catalog) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The extra packages as (PyTorch's variant projects, the others), each in spec order."""
    if not py.packages:
        return (), ()
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    projects = set(catalog.variant_projects.projects) - {"torch"}
    named = [(text, canonicalize_name(Requirement(text).name)) for text in py.packages]
    return (
        tuple(t for t, n in named if n in projects),
        tuple(t for t, n in named if n not in projects),
    )


def torch_in_packages(py: PythonSpec | None) -> Iterator[Finding]:
    """A blocker for an extra requirement on torch that the spec's torch does not satisfy: the
    constraints would make pip refuse it, and without them it would replace the variant build."""
    if py is None or py.torch is None or not py.packages:
        return
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    pinned = Version(f"{py.torch}+{py.cuda_variant}")
    for text in py.packages:
        req = Requirement(text)
        if canonicalize_name(req.name) == "torch" and not req.specifier.contains(pinned, prereleases=True):
            yield Finding(
                rule="python-packages-torch-conflict",
                severity="blocker",
                source="pip documentation, Constraints Files (https://pip.pypa.io/en/stable/user_guide/#constraints-files)",
                message=f"python.packages asks {text}, which python.torch {py.torch}+{py.cuda_variant} does "
                "not satisfy: every pip call holds the venv's torch build, so pip would refuse it; "
                "drop it from python.packages or change python.torch",
            )
