"""Container checks (spec ``containers:``): a container sees every GPU the host sees, and still does
after ``systemctl daemon-reload``; the CDI spec names the loaded driver's libraries.

What is read on the host (:data:`OBSERVER`, by :mod:`provision.verify.hostprobe`, in process for a
local verify and on each host for remote verify): the host's ``nvidia-smi -L``; then, with
``containers.verify_image``, a container started detached through the spec's runtime with every
GPU of the CDI spec (``--device nvidia.com/gpu=all``, the CDI device name NVIDIA's spec defines)
whose own process lists its GPUs (``nvidia-smi -L`` into a directory shared with the host), then
waits; ``systemctl daemon-reload`` on the host; a signal file; the same process lists them again;
the container and the directory are removed. The reload is the known way a running container
loses its GPUs ("Failed to initialize NVML: Unknown Error"; NVIDIA Container Toolkit
troubleshooting), so the second listing, by the process that was running through the reload, is
what proves the CDI spec or the /dev/char links hold. The container's own process lists the GPUs
rather than ``exec``: the same for docker and podman, and it runs where ``runc exec`` cannot join
a container (a chroot). Every argv is data (an image or a root filesystem from the spec is one
element); the shell scripts are constants.
"""

from __future__ import annotations

import re
from typing import Any

from provision.detect.domains.containers import CdiSpecs, ContainerFacts
from provision.detect.domains.driver import LoadedDriver
from provision.detect.unknown import Unknown
from provision.models import Frozen
from provision.spec.models import ContainersSpec, Spec
from provision.unknown import because
from provision.verify.context import Context, result
from provision.verify.models import CheckResult, Measured, Threshold
from provision.verify.observe import Observer

CONTAINER = "provision-verify-gpus"
"""The verify container's name (removed before and after)."""
SHARED = "/run/provision-verify-gpus"
"""The host directory the container writes its listings to (mounted at :data:`INSIDE`)."""
INSIDE = "/provision-verify"
WAIT_S = 30
"""How long each side waits for the other's file (the listing, the signal), seconds."""
_LIST = "nvidia-smi -L > {d}/{f}.tmp 2>&1; echo rc=$? >> {d}/{f}.tmp; mv {d}/{f}.tmp {d}/{f}"
_WAIT = "i=0; until [ -e {d}/{f} ] || [ $i -ge {n} ]; do sleep 0.2; i=$((i+1)); done"
IN_CONTAINER = "; ".join(
    (
        _LIST.format(d=INSIDE, f="before"),
        _WAIT.format(d=INSIDE, f="go", n=WAIT_S * 5),
        _LIST.format(d=INSIDE, f="after"),
    )
)
"""The container's process: list, wait for the host's signal (after the reload), list again."""
TIMEOUT_S = 60.0
"""Seconds each runtime command has (a first start of an image can take several)."""
SOURCE = (
    "NVIDIA Container Toolkit sample workload and troubleshooting (nvidia-smi -L in a container matches "
    "the host's; GPUs lost after systemctl daemon-reload)"
)
_UUID = re.compile(r"\(UUID: ([^)]+)\)")
_HINT = "provision apply regenerates the CDI spec and the runtime's configuration; then run verify again."


class ContainersRun(Frozen):
    """What the host probe read for the container checks.

    Attributes:
        host: The host's GPUs (``nvidia-smi -L``'s UUIDs, else its lines), or why unread.
        started: Why the container did not start; None when it did (or none was asked).
        before: The GPUs ``nvidia-smi -L`` lists in the container, or why none.
        reload: Why ``systemctl daemon-reload`` did not run; None when it ran.
        after: The container's GPUs after the reload, or why none.
        asked: Whether a container was asked for (``containers.verify_image`` is set).
    """

    host: tuple[str, ...] | str
    asked: bool = False
    started: str | None = None
    before: tuple[str, ...] | str = ()
    reload: str | None = None
    after: tuple[str, ...] | str = ()


def _image(wanted: ContainersSpec) -> list[str]:
    image = wanted.verify_image or ""
    return ["--rootfs", image] if image.startswith("/") else [image]


def commands(wanted: ContainersSpec) -> list[list[str]]:
    """The part's commands, in order (shape in :mod:`provision.verify.hostprobe`)."""
    host = [["nvidia-smi", "-L"]]
    if wanted.verify_image is None or wanted.runtime == "containerd":
        return host
    rt = wanted.runtime
    start = [rt, "run", "-d", "--name", CONTAINER, "--network=none", "--device", "nvidia.com/gpu=all"]
    start += ["-v", f"{SHARED}:{INSIDE}"]
    if rt == "podman":
        start.append("--security-opt=label=disable")  # SELinux hosts: NVML's "Insufficient Permissions"
    read = "; cat {d}/{f}"
    return [
        *host,
        [rt, "rm", "-f", CONTAINER],
        ["sh", "-c", f"rm -rf {SHARED} && mkdir -p {SHARED}"],
        [*start, *_image(wanted), "sh", "-c", IN_CONTAINER],
        ["sh", "-c", _WAIT.format(d=SHARED, f="before", n=WAIT_S * 5) + read.format(d=SHARED, f="before")],
        ["systemctl", "daemon-reload"],
        [
            "sh",
            "-c",
            f"touch {SHARED}/go; "
            + _WAIT.format(d=SHARED, f="after", n=WAIT_S * 5)
            + read.format(d=SHARED, f="after"),
        ],
        [rt, "rm", "-f", CONTAINER],
        ["rm", "-rf", SHARED],
    ]


STARTED = 3
"""Index of the container's start in :func:`commands`; what waits on the container runs after it only."""


def containers_job(spec: Spec) -> dict[str, Any] | None:
    """The host-probe part for a spec with ``containers:``; None otherwise. The reads that wait for
    the container's listings, and the reload between them, run only when it started (else each
    read would wait :data:`WAIT_S` for a file nothing writes)."""
    if spec.containers is None:
        return None
    argvs = commands(spec.containers)
    waits = {STARTED + 1, STARTED + 2, STARTED + 3} if len(argvs) > 1 else set()
    return {
        "commands": [
            {"argv": argv, "timeout": TIMEOUT_S, "after": STARTED if i in waits else None}
            for i, argv in enumerate(argvs)
        ]
    }


def gpus_of(answer: Any, what: str) -> tuple[str, ...] | str:
    """The GPUs an ``nvidia-smi -L`` answer lists (UUIDs where it gives them), or why none."""
    why = _failed(answer, what)
    if why is not None:
        return why
    lines = [line.strip() for line in str(answer.get("stdout", "")).splitlines() if line.startswith("GPU ")]
    if not lines:
        return f"{what}: no GPU listed"
    return tuple(m.group(1) if (m := _UUID.search(line)) else line for line in lines)


def _failed(answer: Any, what: str) -> str | None:
    if not isinstance(answer, dict):
        return f"{what}: no answer in the probe's output"
    if answer.get("missing"):
        return f"{what}: not found on the host"
    if "skipped" in answer:
        return f"{what}: not run, the container did not start"
    if "error" in answer:
        return f"{what}: {answer['error']}"
    if answer.get("rc") != 0:
        said = (str(answer.get("stderr") or "") or str(answer.get("stdout") or "")).strip().splitlines()
        return f"{what} exited {answer.get('rc')}: {said[-1][:200] if said else 'no output'}"
    return None


def _listed(answer: Any, what: str) -> tuple[str, ...] | str:
    """A listing the container's process wrote (``nvidia-smi -L``'s output, then ``rc=N``), read
    back by ``cat``; its absence means the process never got there."""
    why = _failed(answer, what)
    if why is not None:
        return because(f"{what}: the container wrote no listing within {WAIT_S} s", why)
    lines = str(answer.get("stdout", "")).rstrip("\n").splitlines()
    rc = lines[-1].removeprefix("rc=") if lines and lines[-1].startswith("rc=") else "?"
    body = "\n".join(lines[:-1])
    return gpus_of({"rc": int(rc) if rc.isdigit() else -1, "stdout": body, "stderr": body}, what)


def containers_from(spec: Spec, part: Any) -> ContainersRun:
    """The run in the host probe's answer to :func:`containers_job` (pure; never raises)."""
    got = part.get("commands") if isinstance(part, dict) else None
    answers: list[Any] = got if isinstance(got, list) else []

    def answer(i: int) -> Any:
        return answers[i] if i < len(answers) else None

    wanted = spec.containers
    host = gpus_of(answer(0), "nvidia-smi -L on the host")
    if wanted is None or len(commands(wanted)) == 1:
        return ContainersRun(host=host)
    rt = wanted.runtime
    started = _failed(answer(STARTED), f"{rt} run")
    if started is not None:
        return ContainersRun(host=host, asked=True, started=started)
    return ContainersRun(
        host=host,
        asked=True,
        before=_listed(answer(STARTED + 1), f"nvidia-smi -L in the {rt} container"),
        reload=_failed(answer(STARTED + 2), "systemctl daemon-reload"),
        after=_listed(answer(STARTED + 3), f"nvidia-smi -L in the {rt} container after daemon-reload"),
    )


_TITLES = {
    "container-gpus": "a container sees every GPU the host sees",
    "container-gpus-after-daemon-reload": "the container still sees them after systemctl daemon-reload",
    "cdi-spec-driver": "the CDI spec names the loaded driver",
}


def _same(check_id: str, host: tuple[str, ...] | str, seen: tuple[str, ...] | str) -> CheckResult:
    title = _TITLES[check_id]
    if isinstance(host, str):
        return result(
            check_id, title, "fail", detail=host, hint="nvidia-smi must list the GPUs on the host first."
        )
    if isinstance(seen, str):
        return result(check_id, title, "fail", detail=seen, hint=_HINT)
    missing = sorted(set(host) - set(seen))
    return result(
        check_id,
        title,
        "fail" if missing else "pass",
        measured=Measured(value=f"{len(seen)} GPU(s)"),
        threshold=Threshold(op="==", value=f"{len(host)} GPU(s), as on the host", source=SOURCE),
        detail=f"missing in the container: {', '.join(missing)}" if missing else ", ".join(seen),
        hint=_HINT,
    )


def container_gpus(ctx: Context) -> list[CheckResult]:
    """The container's GPUs equal the host's, before and after ``systemctl daemon-reload``."""
    wanted = ctx.spec.containers
    if wanted is None:
        return []
    run = OBSERVER.run(ctx.inputs.observed)
    ids = ("container-gpus", "container-gpus-after-daemon-reload")
    if run is None:
        return [
            result(i, _TITLES[i], "skip", detail="containers not read (inputs saved without it)") for i in ids
        ]
    if isinstance(run, Unknown):
        return [result(i, _TITLES[i], "fail", detail=run.unknown, hint=_HINT) for i in ids]
    if not run.asked:
        why = (
            "containerd: verify runs no container through ctr; start one with nerdctl --gpus all"
            if wanted.runtime == "containerd"
            else "containers.verify_image is not set: no container was run"
        )
        return [result(i, _TITLES[i], "skip", detail=why) for i in ids]
    if run.started is not None:
        return [result(i, _TITLES[i], "fail", detail=run.started, hint=_HINT) for i in ids]
    after = (
        result(ids[1], _TITLES[ids[1]], "skip", detail=run.reload)
        if run.reload is not None
        else _same(ids[1], run.host, run.after)
    )
    return [_same(ids[0], run.host, run.before), after]


def cdi_driver(ctx: Context) -> list[CheckResult]:
    """Every NVIDIA CDI spec names the loaded driver's libraries (a stale one names the previous)."""
    if ctx.spec.containers is None:
        return []
    check_id, title = "cdi-spec-driver", _TITLES["cdi-spec-driver"]
    found: ContainerFacts | None = ctx.facts.containers
    cdi = found.cdi if found is not None else Unknown(unknown="CDI specs not probed")
    loaded = ctx.facts.driver
    if isinstance(cdi, Unknown):
        return [result(check_id, title, "fail", detail=cdi.unknown, hint=_HINT)]
    specs = _nvidia(cdi)
    if not specs:
        return [
            result(check_id, title, "fail", detail="no CDI spec defines nvidia.com/gpu devices", hint=_HINT)
        ]
    if not isinstance(loaded, LoadedDriver):
        return [
            result(
                check_id, title, "skip", detail=because("no driver loaded to compare with", loaded.unknown)
            )
        ]
    stale = [f"{s.path} names {s.driver or 'no driver'}" for s in specs if s.driver != str(loaded.version)]
    return [
        result(
            check_id,
            title,
            "fail" if stale else "pass",
            measured=Measured(value=", ".join(sorted({s.driver or "none" for s in specs}))),
            threshold=Threshold(
                op="==", value=str(loaded.version), source="loaded driver (/proc/driver/nvidia/version)"
            ),
            detail="; ".join(stale) or ", ".join(s.path for s in specs),
            hint=_HINT,
        )
    ]


def _nvidia(cdi: CdiSpecs) -> tuple[Any, ...]:
    return cdi.of_kind("nvidia.com/gpu")


OBSERVER = Observer(
    key="containers",
    model=ContainersRun,
    job=containers_job,
    parse=containers_from,
    checks=(container_gpus, cdi_driver),
)
"""The containers component's reading (the host's GPUs, a container's before and after a reload)."""
