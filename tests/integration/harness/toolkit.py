"""The stand-in of NVIDIA's libnvidia-container repository: the container toolkit's four packages.

NVIDIA's repository (https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH), install
guide: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html)
cannot be reached from CI, so the harness publishes tiny packages whose *names, versions and
dependency relations* follow the real ones, in their own signed flat repository with their own
key (the real repository is separate from the CUDA repository and signed by another key):

- the four packages of one release, ``nvidia-container-toolkit``, ``nvidia-container-toolkit-base``,
  ``libnvidia-container-tools`` and ``libnvidia-container1``, at ``<version>-1``; the toolkit
  depends on its base and on the tools at exactly its version, the tools on the library at
  exactly its version (release notes 1.18.0: "requires that the version of the
  libnvidia-container* libraries exactly match the version of the nvidia-container-toolkit*
  packages", https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/release-notes.html);
- releases 1.17.8 and 1.18.2 (real ones); 1.19.1 is left out on purpose, so that a spec naming
  it asks for a release the repository lacks;
- from 1.18.0, ``nvidia-container-toolkit-base`` ships ``nvidia-cdi-refresh.path`` and
  ``.service`` (deployments/systemd in the toolkit's repository; the units' bodies are ours).

``/usr/bin/nvidia-ctk`` is a stand-in (Python, the target's python3) implementing the subset of
the real command the tests need, with the real command's arguments:

- ``cdi generate --output=PATH``: a CDI spec (cdiVersion 0.5.0; 0.7.0 from 1.19.1) of kind
  ``nvidia.com/gpu`` with devices ``N``, ``GPU-standin-N`` and ``all``. The stand-in GPUs are
  character devices the test creates under ``/var/lib/nvidia-standin/dev/nvidiaN`` (a chroot
  shares the host's ``/dev``, where no test may create nodes); the spec injects each as
  ``/dev/nvidiaN`` in the container (``deviceNodes[].hostPath``), and mounts the driver's
  ``libcuda.so.<version>`` and ``libnvidia-ml.so.<version>`` found in the library directory, and
  ``/usr/bin/nvidia-smi`` where it exists, as the real generator does; no driver library: exit 1.
- ``cdi list``: the ``nvidia.com/gpu=NAME`` devices of the specs in /etc/cdi and /var/run/cdi.
- ``runtime configure --runtime=docker|containerd [--cdi.enabled]``: the nvidia runtime in
  ``/etc/docker/daemon.json``, or containerd's ``conf.d/99-nvidia.toml`` imported by its config.
- ``system create-dev-char-symlinks --create-all``: ``/dev/char/MAJ:MIN`` links for the stand-in
  nodes, in the directory ``--dev-char-path`` names (default ``/dev/char``; the tests name one in
  the target's own tree, never the host's ``/dev``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from . import aptrepo
from .debs import ensure_debs
from .packages import STANDIN_DEV, Package
from .server import StaticServer

RELEASES = ("1.17.8", "1.18.2")
SUBPATH = "libnvidia-container/stable/deb/amd64"

NVIDIA_CTK = """#!/usr/bin/python3
# Stand-in nvidia-ctk {version} for provision's integration tests (see tests/integration/harness/toolkit.py).
import glob, json, os, sys

VERSION = "{version}"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
STANDIN = "{standin}"


def opt(name, default=None):
    for arg in sys.argv:
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def gpus():
    return sorted(glob.glob(STANDIN + "/nvidia[0-9]*"), key=lambda p: int(p.rsplit("nvidia", 1)[1]))


def generate():
    libs = sorted(glob.glob(LIBDIR + "/libcuda.so.*.*") + glob.glob(LIBDIR + "/libnvidia-ml.so.*.*"))
    if not libs:
        print("level=error msg=\\"failed to generate CDI spec: failed to locate libnvidia-ml.so\\"",
              file=sys.stderr)
        return 1
    mounts = [dict(hostPath=p, containerPath=p, options=["ro", "nosuid", "nodev", "bind"]) for p in libs]
    smi = "/usr/bin/nvidia-smi"
    if os.path.exists(smi):  # as the real generator, only what it finds
        mounts.append(dict(hostPath=smi, containerPath=smi, options=["ro", "bind"]))
    devices = []
    for node in gpus():
        n = node.rsplit("nvidia", 1)[1]
        edits = dict(deviceNodes=[dict(path="/dev/nvidia" + n, hostPath=node)])
        devices += [dict(name=n, containerEdits=edits), dict(name="GPU-standin-" + n, containerEdits=edits)]
    every = [e for d in devices[::2] for e in d["containerEdits"]["deviceNodes"]]
    devices.append(dict(name="all", containerEdits=dict(deviceNodes=every)))
    cdi = "0.7.0" if tuple(map(int, VERSION.split("."))) >= (1, 19, 1) else "0.5.0"
    spec = dict(cdiVersion=cdi, kind="nvidia.com/gpu", devices=devices,
                containerEdits=dict(env=["NVIDIA_VISIBLE_DEVICES=void"], mounts=mounts))
    out = opt("--output", "/dev/stdout")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("---\\n")
        f.write(yaml(spec))
    print("level=info msg=\\"Generated CDI spec with version " + cdi + "\\"", file=sys.stderr)
    return 0


def yaml(value, indent=0):
    pad = " " * indent
    if isinstance(value, dict):
        lines = []
        for k, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(pad + k + ":\\n" + yaml(v, indent + 2))
            else:
                lines.append(pad + k + ": " + scalar(v) + "\\n")
        return "".join(lines)
    if isinstance(value, list):
        out = []
        for item in value:
            nested = isinstance(item, (dict, list))
            text = yaml(item, indent + 2) if nested else pad + "  " + scalar(item) + "\\n"
            out.append(pad + "- " + text.lstrip(" "))
        return "".join(out)
    return pad + scalar(value) + "\\n"


def scalar(v):
    if v == [] or v == {{}}:
        return "[]" if v == [] else "{{}}"
    return json.dumps(v)


def cdi_list():
    found = []
    for path in sorted(glob.glob("/etc/cdi/*.yaml") + glob.glob("/var/run/cdi/*.yaml")):
        kind = None
        for line in open(path):
            if line.startswith("kind:"):
                kind = json.loads(line.split(":", 1)[1].strip())
            if line.startswith("- name:") or line.startswith("  name:"):
                found.append(str(kind) + "=" + json.loads(line.split(":", 1)[1].strip()))
    print("level=info msg=\\"Found " + str(len(found)) + " CDI devices\\"", file=sys.stderr)
    print("\\n".join(found))
    return 0


def configure():
    runtime = opt("--runtime")
    cdi = "--cdi.enabled" in sys.argv
    if runtime == "docker":
        path = "/etc/docker/daemon.json"
        doc = json.load(open(path)) if os.path.exists(path) else {{}}
        doc.setdefault("runtimes", {{}})["nvidia"] = dict(args=[], path="nvidia-container-runtime")
        if cdi:
            doc.setdefault("features", {{}})["cdi"] = True
        os.makedirs("/etc/docker", exist_ok=True)
        json.dump(doc, open(path, "w"), indent=4)
        return 0
    if runtime == "containerd":
        os.makedirs("/etc/containerd/conf.d", exist_ok=True)
        with open("/etc/containerd/conf.d/99-nvidia.toml", "w") as f:
            f.write("version = 2\\n\\n[plugins.\\"io.containerd.grpc.v1.cri\\"]\\n")
            f.write("  enable_cdi = " + ("true" if cdi else "false") + "\\n\\n")
            f.write("[plugins.\\"io.containerd.grpc.v1.cri\\".containerd.runtimes.nvidia]\\n")
            f.write("  runtime_type = \\"io.containerd.runc.v2\\"\\n")
        main = "/etc/containerd/config.toml"
        text = open(main).read() if os.path.exists(main) else "version = 2\\n"
        if "conf.d" not in text:
            text = "imports = [\\"/etc/containerd/conf.d/*.toml\\"]\\n" + text
        open(main, "w").write(text)
        return 0
    print("level=error msg=\\"unrecognized runtime '" + str(runtime) + "'\\"", file=sys.stderr)
    return 1


def dev_char():
    where = opt("--dev-char-path", "/dev/char")
    os.makedirs(where, exist_ok=True)
    for node in gpus():
        st = os.stat(node)
        link = os.path.join(where, str(os.major(st.st_rdev)) + ":" + str(os.minor(st.st_rdev)))
        if not os.path.lexists(link):
            os.symlink(node, link)
    return 0


def main():
    words = [a for a in sys.argv[1:] if not a.startswith("-")]
    if "--version" in sys.argv:
        print("NVIDIA Container Toolkit CLI version " + VERSION)
        return 0
    table = {{("cdi", "generate"): generate, ("cdi", "list"): cdi_list, ("runtime", "configure"): configure,
             ("system", "create-dev-char-symlinks"): dev_char}}
    action = table.get(tuple(words[:2]))
    if action is None:
        print("stand-in nvidia-ctk: not implemented: " + " ".join(sys.argv[1:]), file=sys.stderr)
        return 2
    return action()


sys.exit(main())
"""

REFRESH_PATH = (
    "[Unit]\nDescription=Trigger CDI refresh on NVIDIA driver install / uninstall events\n\n"
    "[Path]\nPathChanged=/lib/modules/%v/modules.dep\nPathChanged=/usr/bin/nvidia-ctk\n\n"
    "[Install]\nWantedBy=multi-user.target\n"
)
REFRESH_SERVICE = (
    "[Unit]\nDescription=Refresh NVIDIA CDI specification file\n\n[Service]\nType=oneshot\n"
    "Environment=NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml\n"
    "ExecStart=/usr/bin/nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml\n"
)


def _eq(name: str, version: str) -> str:
    return f"{name} (= {version})"


def toolkit_release(upstream: str) -> list[Package]:
    """The four packages of one release, tied by exact-version relations."""
    v = f"{upstream}-1"
    base_files = {"/usr/bin/nvidia-ctk": (0o755, NVIDIA_CTK.format(version=upstream, standin=STANDIN_DEV))}
    if tuple(map(int, upstream.split("."))) >= (1, 18, 0):
        base_files |= {
            "/lib/systemd/system/nvidia-cdi-refresh.path": (0o644, REFRESH_PATH),
            "/lib/systemd/system/nvidia-cdi-refresh.service": (0o644, REFRESH_SERVICE),
        }
    lib = "/usr/lib/x86_64-linux-gnu"
    return [
        Package(
            "nvidia-container-toolkit",
            v,
            depends=(_eq("nvidia-container-toolkit-base", v), _eq("libnvidia-container-tools", v)),
            files={"/usr/bin/nvidia-container-runtime-hook": (0o755, "#!/bin/sh\nexit 0\n")},
        ),
        Package("nvidia-container-toolkit-base", v, files=base_files),
        Package(
            "libnvidia-container-tools",
            v,
            depends=(_eq("libnvidia-container1", v),),
            files={"/usr/bin/nvidia-container-cli": (0o755, f"#!/bin/sh\necho 'cli-version: {upstream}'\n")},
        ),
        Package(
            "libnvidia-container1",
            v,
            files={
                f"{lib}/libnvidia-container.so.{upstream}": (
                    0o644,
                    f"stand-in libnvidia-container {upstream}\n",
                )
            },
        ),
    ]


@dataclass(frozen=True)
class ToolkitRepo:
    """The signed stand-in repository: its URL (apt suite ``/``), key file and fingerprint."""

    url: str
    keyring: Path
    fingerprint: str
    build_seconds: float


def publish_toolkit_repo(server: StaticServer, cache: Path, scratch: Path) -> ToolkitRepo:
    """Build (or reuse) the toolkit .debs, then publish and sign them under ``server.root``."""
    debs = ensure_debs([p for release in RELEASES for p in toolkit_release(release)], cache)
    started = time.monotonic()
    key = aptrepo.make_signing_key(
        scratch / "key", "NVIDIA container toolkit stand-in <cudatools@nvidia.com>"
    )
    aptrepo.build_repo(debs, server.root / SUBPATH, key)
    return ToolkitRepo(f"{server.url}/{SUBPATH}", key.keyring, key.fingerprint, time.monotonic() - started)
