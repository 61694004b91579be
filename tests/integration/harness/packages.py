"""The stand-in package set for NVIDIA's Debian 12 CUDA repository (``repos/debian12/x86_64``).

NVIDIA's repository cannot be reached from CI, so the harness publishes tiny packages whose
*names, versions and dependency relations* follow the real ones. Each fact mirrored, and where
it comes from. Short names used below:

- DIG: NVIDIA Driver Installation Guide, Debian and Ubuntu pages ("Selecting a branch or a
  specific driver version": "All releases beyond driver version 570 will use these packaging
  conventions"), https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/
- GDC: NVIDIA/gpu-driver-container ``ubuntu24.04/install.sh`` (fabric manager, NSCQ package
  names by driver branch), https://github.com/NVIDIA/gpu-driver-container
- FM packaging: NVIDIA's fabric manager packaging READMEs,
  https://github.com/NVIDIA/apt-packaging-fabric-manager and
  https://github.com/NVIDIA/yum-packaging-fabric-manager, with the Fabric Manager User Guide,
  https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/
- index: NVIDIA's Ubuntu 24.04 CUDA repository package index as ``apt-cache`` shows it
  (names, versions, Depends/Provides/Conflicts; catalog source APT-2404),
  https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/
- Debian 12 index: the same repository for Debian 12,
  https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
- fixture: this repository's capture of the real H200 machine,
  tests/fixtures/raw/h200-ubuntu2404-2026-12-01/ (``dpkg-nvidia.txt`` unless another file is named)

Driver (branch 580 at 580.82.07 and 580.95.05, and branch 590 at 590.48.01):
  - From branch 580 the packages drop the branch suffix: ``nvidia-open``, ``cuda-drivers``,
    ``nvidia-fabricmanager`` with the branch in the *version* (DIG; GDC; index: suffixed
    ``nvidia-open-<b>`` / ``cuda-drivers-<b>`` end at 580, ``nvidia-fabricmanager-<b>`` at 575,
    and 590/595/610 exist only unsuffixed). All three versions are real
    releases present in the index's driver patch levels. Debian revisions are ``-1`` (GDC:
    ``nvidia-fabricmanager=${DRIVER_VERSION}-1`` from branch 580).
  - ``nvidia-driver-pinning-<branch>`` / ``nvidia-driver-pinning-<version>`` ship an apt
    preferences file at priority 1000 and Provide/Conflict ``nvidia-driver-pinning`` so only one
    is installed (index). The file's package globs are ours (the real file was not captured);
    it pins every driver-versioned package of this set.
  - ``nvidia-open`` depends on ``nvidia-driver-open`` and conflicts with ``cuda-drivers`` and
    ``nvidia-driver`` (index: ``nvidia-open``'s Depends and Conflicts); ``cuda-drivers`` is the
    proprietary meta (DIG; index) and depends on ``nvidia-driver``. The exact ``(= version)``
    relations are how NVIDIA ties a driver release together; the per-flavour kernel packages
    ``nvidia-kernel-open-dkms`` / ``nvidia-kernel-dkms`` are the Debian 12 NVIDIA-repo names
    (Debian 12 index). The two flavours conflict with each other here (they build the same
    module names; inferred).
  - ``nvidia-utils`` ships ``/usr/bin/nvidia-smi``: a script that cannot talk to a GPU. It
    answers ``--query-gpu=driver_version --format=csv,noheader`` and ``--version`` with its
    package version, ``-L`` with the container tests' stand-in GPU nodes when there are any,
    and anything else with NVIDIA's real no-driver message and exit status 9.
  - ``nvidia-fabricmanager`` exists at every driver version and **depends on nothing
    driver-specific**. FM packaging documents the rule ("the version of fabricmanager must
    match the NVIDIA driver installed") as a *runtime* check (the daemon refuses to start:
    "fabric manager NVIDIA GPU driver interface version ... don't match"), and the only
    exact-version package relation in the public sources is Ubuntu's
    ``cuda-drivers-fabricmanager-535`` meta depending on ``nvidia-fabricmanager-535``
    (https://packages.ubuntu.com/search?keywords=cuda-drivers-fabricmanager-535), not the fabric
    manager depending on the driver. So apt will happily install a mismatched pair:
    keeping them equal is the planner's job, and tests can prove it.

CUDA toolkit:
  - ``cuda-toolkit-13-0`` 13.0.2-1 -> ``cuda-compiler-13-0`` 13.0.2-1 -> ``cuda-nvcc-13-0``
    13.0.88-1, plus ``cuda-toolkit-13-0-config-common`` / ``cuda-toolkit-13-config-common`` /
    ``cuda-toolkit-config-common`` 13.0.96-1: names and versions from the fixture. ``nvcc``
    prints the fixture's ``nvcc.txt`` text (release 13.0, V13.0.88). The config-common postinst
    registers ``/usr/local/cuda`` and ``/usr/local/cuda-13`` alternatives like the fixture's
    ``cuda-dirs.txt`` shows (which package does it for real is inferred).
  - ``cuda-toolkit-12-8`` 12.8.1-1 -> ``cuda-nvcc-12-8`` 12.8.93-1: a second, older toolkit
    (CUDA 12.8 update 1; nvcc build string approximate).
  - ``cuda-13-0`` and ``cuda`` are the driver-pulling metas (NVIDIA CUDA Installation Guide for
    Linux, "Meta Packages": ``cuda-X-Y`` installs toolkit and driver, ``cuda-toolkit-X-Y`` no
    driver, https://docs.nvidia.com/cuda/cuda-installation-guide-linux/): ``cuda`` ->
    ``cuda-13-0`` -> ``cuda-toolkit-13-0`` + ``cuda-drivers``. A planner must never choose
    them; installing them drags the proprietary driver in.

cuDNN and NCCL:
  - ``libcudnn9-cuda-13``, ``libcudnn9-dev-cuda-13``, ``libcudnn9-headers-cuda-13`` at
    9.14.0.64-1 (fixture) and 9.20.0.48-1 (``libcudnn9-cuda-13_9.20.0.48-1_amd64.deb`` in the
    Debian 12 index; package names from NVIDIA's "Installing cuDNN Backend on Linux",
    https://docs.nvidia.com/deeplearning/cudnn/installation/linux.html); dev depends on the
    same-version library and headers.
  - ``libnccl2`` and ``libnccl-dev`` at 2.28.3-1+cuda13.0 (fixture) and 2.29.2-1+cuda13.0
    (version format ``<nccl>-1+cuda<X.Y>`` from NVIDIA's NCCL Installation Guide,
    https://docs.nvidia.com/deeplearning/nccl/install-guide/index.html); dev depends on the
    same-version library.

DCGM 4 and dcgm-exporter: see ``dcgm.py`` (stand-ins mirroring NVIDIA's names, versions,
dependencies and units; the exporter serves real-format metrics).

Maintainer is ``cudatools <cudatools@nvidia.com>`` (index: ``apt-cache show`` tells NVIDIA's
packages from Ubuntu's, whose Maintainer is the Ubuntu Kernel Team). Payloads are a few bytes each.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DRIVER_VERSIONS = ("580.82.07", "580.95.05", "590.48.01")
CUDNN_VERSIONS = ("9.14.0.64-1", "9.20.0.48-1")
NCCL_VERSIONS = ("2.28.3-1+cuda13.0", "2.29.2-1+cuda13.0")
STANDIN_DEV = "/var/lib/nvidia-standin/dev"
"""Where the container tests make stand-in GPU device nodes (a chroot shares the host's /dev)."""
MAINTAINER = "cudatools <cudatools@nvidia.com>"

#: NVIDIA's message when nvidia-smi finds no loaded driver; it exits with status 9.
NO_DRIVER_MESSAGE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)

#: fixture nvcc.txt, CUDA 13.0 update 2.
NVCC_13_0 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""
NVCC_12_8 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0
"""


@dataclass(frozen=True)
class Package:
    """One stand-in binary package.

    Attributes:
        name: Package name, as in NVIDIA's repository.
        version: Full Debian version (upstream-revision).
        depends/conflicts/provides/replaces: Relation fields, already formatted.
        files: Payload, path inside the root -> (mode, content).
        scripts: Maintainer scripts (``postinst`` ...) -> shell text.
        arch: ``amd64`` or ``all``.
    """

    name: str
    version: str
    depends: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    replaces: tuple[str, ...] = ()
    files: dict[str, tuple[int, str]] = field(default_factory=dict)
    scripts: dict[str, str] = field(default_factory=dict)
    arch: str = "amd64"
    description: str = "NVIDIA stand-in package for provision's integration tests"

    @property
    def filename(self) -> str:
        """The ``.deb`` name dpkg-deb would pick: ``name_version-without-epoch_arch.deb``."""
        return f"{self.name}_{self.version.split(':')[-1]}_{self.arch}.deb"


def _eq(name: str, version: str) -> str:
    return f"{name} (= {version})"


def _nvidia_smi(version: str) -> str:
    cuda = "13.1" if version.startswith("590") else "13.0"
    return f"""#!/bin/sh
# Stand-in nvidia-smi {version}: no GPU here, so only version queries answer, and -L lists the
# stand-in GPUs: the nodes a container got as /dev/nvidiaN (CDI), else those the container tests
# made under {STANDIN_DEV} on the host (see tests/integration/harness/toolkit.py).
case "$*" in
  "--query-gpu=driver_version --format=csv,noheader") echo "{version}"; exit 0 ;;
  "-L")
    found=0
    for d in /dev/nvidia[0-9]* {STANDIN_DEV}/nvidia[0-9]*; do
      [ -e "$d" ] || continue
      n=${{d##*nvidia}}; found=1
      echo "GPU $n: NVIDIA stand-in (UUID: GPU-standin-$n)"
    done
    [ $found = 1 ] && exit 0 ;;
  "--version")
    printf 'NVIDIA-SMI version  : {version}\\nNVML version        : {version.rsplit(".", 1)[0]}\\n'
    printf 'DRIVER version      : {version}\\nCUDA Version        : {cuda}\\n'
    exit 0 ;;
esac
echo "{NO_DRIVER_MESSAGE}"
exit 9
"""


def driver_release(version: str) -> list[Package]:
    """All packages of one driver release, tied together by ``(= version-1)`` relations."""
    v = f"{version}-1"
    lib = "/usr/lib/x86_64-linux-gnu"
    return [
        Package(
            "nvidia-open",
            v,
            depends=(_eq("nvidia-driver-open", v),),
            conflicts=("cuda-drivers", "nvidia-driver"),
        ),
        Package(
            "nvidia-driver-open",
            v,
            depends=(_eq("libnvidia-compute", v), _eq("nvidia-utils", v), _eq("nvidia-kernel-open-dkms", v)),
        ),
        Package("cuda-drivers", v, depends=(_eq("nvidia-driver", v),), conflicts=("nvidia-open",)),
        Package(
            "nvidia-driver",
            v,
            depends=(_eq("libnvidia-compute", v), _eq("nvidia-utils", v), _eq("nvidia-kernel-dkms", v)),
            conflicts=("nvidia-driver-open",),
        ),
        Package(
            "libnvidia-compute",
            v,
            files={
                f"{lib}/libcuda.so.{version}": (0o644, f"stand-in libcuda {version}\n"),
                f"{lib}/libnvidia-ml.so.{version}": (0o644, f"stand-in libnvidia-ml {version}\n"),
            },
        ),
        Package(
            "nvidia-utils",
            v,
            depends=(_eq("libnvidia-compute", v),),
            files={"/usr/bin/nvidia-smi": (0o755, _nvidia_smi(version))},
        ),
        Package(
            "nvidia-kernel-open-dkms",
            v,
            conflicts=("nvidia-kernel-dkms",),
            replaces=("nvidia-kernel-dkms",),
            files={
                f"/usr/src/nvidia-{version}/dkms.conf": (
                    0o644,
                    f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{version}"\n',
                )
            },
        ),
        Package(
            "nvidia-kernel-dkms",
            v,
            conflicts=("nvidia-kernel-open-dkms",),
            replaces=("nvidia-kernel-open-dkms",),
            files={
                f"/usr/src/nvidia-{version}/dkms.conf": (
                    0o644,
                    f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{version}"\n',
                )
            },
        ),
        Package(
            "nvidia-fabricmanager",
            v,
            files={
                "/usr/bin/nv-fabricmanager": (
                    0o755,
                    f"#!/bin/sh\necho 'Fabric Manager version is : {version}'\n",
                ),
                "/usr/share/nvidia/nvswitch/fabricmanager.cfg": (0o644, "FABRIC_MODE=0\n"),
                "/lib/systemd/system/nvidia-fabricmanager.service": (0o644, _fm_unit()),
            },
        ),
    ]


def _fm_unit() -> str:
    return (
        "[Unit]\nDescription=NVIDIA fabric manager service\n\n[Service]\nType=forking\n"
        "ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def pinning(name_suffix: str, version_glob: str, version: str) -> Package:
    """``nvidia-driver-pinning-<suffix>``: a priority-1000 pin of driver packages to ``version_glob``."""
    name = f"nvidia-driver-pinning-{name_suffix}"
    prefs = f"Package: nvidia-* libnvidia-* cuda-drivers*\nPin: version {version_glob}\nPin-Priority: 1000\n"
    return Package(
        name,
        version,
        arch="all",
        provides=("nvidia-driver-pinning",),
        conflicts=("nvidia-driver-pinning",),
        replaces=("nvidia-driver-pinning",),
        files={f"/etc/apt/preferences.d/{name}": (0o644, prefs)},
    )


def cuda_packages() -> list[Package]:
    """The CUDA 13.0 and 12.8 toolkits and the driver-pulling ``cuda``/``cuda-13-0`` metas."""
    common = "13.0.96-1"
    alternatives = (
        '#!/bin/sh\nset -e\nif [ "$1" = configure ]; then\n'
        "  update-alternatives --install /usr/local/cuda cuda /usr/local/cuda-13.0 130\n"
        "  update-alternatives --install /usr/local/cuda-13 cuda-13 /usr/local/cuda-13.0 130\n"
        "fi\n"
    )
    return [
        Package(
            "cuda-toolkit-13-0",
            "13.0.2-1",
            depends=(
                "cuda-compiler-13-0 (>= 13.0.2)",
                f"cuda-toolkit-13-0-config-common (>= {common})",
                f"cuda-toolkit-13-config-common (>= {common})",
                f"cuda-toolkit-config-common (>= {common})",
            ),
        ),
        Package("cuda-compiler-13-0", "13.0.2-1", depends=("cuda-nvcc-13-0 (>= 13.0.88)",)),
        Package(
            "cuda-nvcc-13-0",
            "13.0.88-1",
            files={"/usr/local/cuda-13.0/bin/nvcc": (0o755, f"#!/bin/sh\ncat <<'EOF'\n{NVCC_13_0}EOF\n")},
        ),
        Package("cuda-toolkit-13-0-config-common", common, arch="all", scripts={"postinst": alternatives}),
        Package("cuda-toolkit-13-config-common", common, arch="all"),
        Package("cuda-toolkit-config-common", common, arch="all"),
        Package("cuda-toolkit-12-8", "12.8.1-1", depends=("cuda-nvcc-12-8 (>= 12.8.93)",)),
        Package(
            "cuda-nvcc-12-8",
            "12.8.93-1",
            files={"/usr/local/cuda-12.8/bin/nvcc": (0o755, f"#!/bin/sh\ncat <<'EOF'\n{NVCC_12_8}EOF\n")},
        ),
        Package(
            "cuda-13-0",
            "13.0.2-1",
            depends=(_eq("cuda-toolkit-13-0", "13.0.2-1"), "cuda-drivers (>= 580.95.05)"),
        ),
        Package("cuda", "13.0.2-1", depends=(_eq("cuda-13-0", "13.0.2-1"),)),
    ]


def cudnn_packages(version: str) -> list[Package]:
    """cuDNN 9 for CUDA 13 at one version: library, headers, and dev (= both)."""
    inc = "/usr/include/x86_64-linux-gnu"
    major, minor, patch = version.split(".")[:3]
    header = f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n#define CUDNN_PATCHLEVEL {patch}\n"
    return [
        Package(
            "libcudnn9-cuda-13",
            version,
            files={
                f"/usr/lib/x86_64-linux-gnu/libcudnn.so.{major}.{minor}.{patch}": (
                    0o644,
                    f"stand-in {version}\n",
                )
            },
        ),
        Package("libcudnn9-headers-cuda-13", version, files={f"{inc}/cudnn_version_v9.h": (0o644, header)}),
        Package(
            "libcudnn9-dev-cuda-13",
            version,
            depends=(_eq("libcudnn9-cuda-13", version), _eq("libcudnn9-headers-cuda-13", version)),
        ),
    ]


def nccl_packages(version: str) -> list[Package]:
    """NCCL at one version: ``libnccl2`` and ``libnccl-dev (= same)``."""
    upstream = version.split("-")[0]
    return [
        Package(
            "libnccl2",
            version,
            files={f"/usr/lib/x86_64-linux-gnu/libnccl.so.{upstream}": (0o644, f"stand-in {version}\n")},
        ),
        Package(
            "libnccl-dev",
            version,
            depends=(_eq("libnccl2", version),),
            files={"/usr/include/nccl.h": (0o644, f"/* stand-in NCCL {upstream} */\n")},
        ),
    ]


def all_packages() -> list[Package]:
    """Every package the stand-in repository publishes, in a stable order."""
    packages: list[Package] = []
    for version in DRIVER_VERSIONS:
        packages += driver_release(version)
    packages += [
        pinning("580", "580.*", "580.95.05-1"),
        pinning("590", "590.*", "590.48.01-1"),
        pinning("580.82.07", "580.82.07-*", "580.82.07-1"),
    ]
    packages += cuda_packages()
    for version in CUDNN_VERSIONS:
        packages += cudnn_packages(version)
    for version in NCCL_VERSIONS:
        packages += nccl_packages(version)
    from .dcgm import dcgm_packages  # imports Package from here

    return packages + dcgm_packages()
