"""Spec v1: the target state of one GPU machine, validated strictly.

The YAML layout mirrors these models one to one; ``provision schema`` prints
the JSON Schema generated from them. Everything that later reaches a command
line is a closed set, a version type or a validated path: never free text.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    Field,
    GetCoreSchemaHandler,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import Url, core_schema

from provision.models import Frozen
from provision.os.select import PACKAGE_MANAGER_CREDENTIALS, releases, repo_code
from provision.serving.arch import ModelArchitecture
from provision.spec.paths import absolute_path, venv_path
from provision.spec.urls import secret_problem
from provision.versions import Dotted, DottedVersion, Driver, DriverVersion, Pep440

_IDENTIFIER = r"[a-z0-9][a-z0-9._-]{0,62}"


def _identifier(value: str) -> str:
    # A pattern error ("String should match pattern '^[a-z0-9]...'") tells a user nothing; say the rule
    # in words, and the fix when only the case is wrong (a GPU model written as on the box: "A100X").
    if re.fullmatch(_IDENTIFIER, value):
        return value
    hint = f"; did you mean {value.lower()!r}?" if re.fullmatch(_IDENTIFIER, value.lower()) else ""
    raise ValueError(
        f"{value!r} is not a valid name: lower-case letters, digits, '.', '_' and '-', at most 63 "
        f"characters, starting with a letter or a digit{hint}"
    )


Identifier = Annotated[
    str, AfterValidator(_identifier), Field(json_schema_extra={"pattern": f"^{_IDENTIFIER}$"})
]
"""Lower-case name safe for file names and Ansible variables."""


AbsolutePath = Annotated[str, AfterValidator(absolute_path)]


VenvPath = Annotated[str, AfterValidator(absolute_path), AfterValidator(venv_path)]


def _no_template(value: str) -> str:
    # Spec values travel to Ansible as extravars, and Ansible evaluates "{{ }}" in any variable
    # it reads: "{{ lookup('pipe', ...) }}" in a URL would run a command on the controller.
    if "{" in value or "}" in value:
        raise ValueError("may not contain '{' or '}' (Ansible would evaluate them as a template)")
    return value


def _requirement(value: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement  # ~15 ms: only for python.packages

    try:
        req = Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"not a pip requirement: {exc}") from None
    if req.url:
        raise ValueError("direct URL requirements are not allowed; use python.index_url")
    return str(req)


PipRequirement = Annotated[str, AfterValidator(_no_template), AfterValidator(_requirement)]


class _HttpUrl:
    """pydantic's ``HttpUrl`` check (pydantic-core's URL parser: http or https, at most 2083
    characters, normalized the same way) as Annotated metadata: the value is a
    ``pydantic_core.Url``. ``pydantic.HttpUrl`` itself lives in ``pydantic.networks``, an import of
    2-3 ms (with ``importlib.metadata`` where nothing loaded it yet) for every command that reads a
    spec.
    Source: https://docs.pydantic.dev/latest/api/networks/#pydantic.networks.HttpUrl
    """

    def __get_pydantic_core_schema__(
        self, source: object, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.url_schema(allowed_schemes=["http", "https"], max_length=2083)


def _url_without_braces(value: Url) -> Url:
    _no_template(str(value))
    return value


CREDENTIALS_HELP = (
    "credentials may not be written in a URL (they would reach plans, logs and command lines); "
    f"give them to {PACKAGE_MANAGER_CREDENTIALS}, or to pip in /root/.netrc "
    "(machine HOST login __token__ password TOKEN), mode 0600 (docs/security.md#secrets)"
)


def _url_without_userinfo(value: Url) -> Url:
    # Any userinfo is refused, not only a password: "https://download.pytorch.org@other.host/"
    # names other.host, with download.pytorch.org as a user name (RFC 3986 §3.2.1).
    if value.username is not None or value.password is not None:
        raise ValueError(CREDENTIALS_HELP)
    return value


def _url_without_secrets(value: Url) -> Url:
    if (why := secret_problem(str(value))) is not None:
        raise ValueError(f"{why}, which may carry a secret; {CREDENTIALS_HELP}")
    return value


SafeUrl = Annotated[
    Url,
    _HttpUrl(),
    AfterValidator(_url_without_braces),
    AfterValidator(_url_without_userinfo),
    AfterValidator(_url_without_secrets),
]
"""An http(s) URL without ``{`` or ``}`` (RFC 3986 never allows them unencoded), without userinfo,
a query, a fragment or a token-like path segment (:func:`provision.spec.urls.secret_problem`)."""

KEY_HOSTS = ("developer.download.nvidia.com",)
"""Hosts a repository signing key may be fetched from unless the spec adds its own (NVIDIA's CDN)."""

Hostname = Annotated[
    str, Field(max_length=253, pattern=r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
]
"""A DNS name with a letter top-level label: never an IP literal (no link-local metadata address)."""


def redacted(url: str) -> str:
    """``url`` with any userinfo replaced by ``***``, for messages (a password is never printed)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()


def key_url_problem(url: str, extra_hosts: tuple[str, ...] = ()) -> str | None:
    """Why the signing key may not be fetched from ``url``, or None.

    The key must come over https from :data:`KEY_HOSTS` or a host the spec names in
    ``repository.key_hosts``; anything else (http, an IP literal, a metadata address) is refused.
    """
    parts = urlsplit(url)
    if parts.scheme != "https":
        return "must be an https URL"
    if parts.username is not None or parts.password is not None:
        return CREDENTIALS_HELP
    allowed = (*KEY_HOSTS, *extra_hosts)
    if (parts.hostname or "") not in allowed:
        hosts = ", ".join(allowed)
        return f"host {parts.hostname} is not an allowed key host ({hosts}; add it to repository.key_hosts)"
    return None


class OsSpec(Frozen):
    """Operating system the machine runs (must be one NVIDIA's repository serves)."""

    distro: Literal["ubuntu", "debian", "rocky", "rhel"] = Field(
        description="Distribution ID as in /etc/os-release ID."
    )
    version: Annotated[str, Field(pattern=r"^\d+(\.\d+)?$")] = Field(
        description='VERSION_ID from /etc/os-release, e.g. "24.04" or "12"; for rocky and rhel the major '
        '("9", "10": any minor of it) or an exact "9.5".'
    )
    architecture: Literal["x86_64", "aarch64"] = Field(
        "x86_64", description="CPU architecture, as `uname -m` prints it; picks NVIDIA's repository."
    )

    @model_validator(mode="after")
    def _supported_release(self) -> OsSpec:
        """The family's releases say (:meth:`provision.os.base.FamilyReleases.unsupported`): rocky
        and rhel 9 and 10 only, x86_64 only; any Debian or Ubuntu release."""
        problem = releases(self.distro).unsupported(self.distro, self.version, self.architecture)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def repo_code(self) -> str:
        """NVIDIA repository distro code, e.g. ``ubuntu2404``, ``debian12``, ``rhel9`` (rocky 9.5)."""
        return repo_code(self.distro, self.version)


class GpuSpec(Frozen):
    """Which GPUs the machine has: a catalog model id and how many."""

    model: Identifier = Field(
        description="Catalog GPU id, e.g. a100x or h200-sxm (`provision catalog gpus`)."
    )
    count: StrictInt = Field(ge=1, le=16, description="Number of GPUs expected by nvidia-smi.")
    max_path: Literal["NV", "PIX", "PXB", "PHB", "NODE", "SYS"] | None = Field(
        None,
        description="Worst acceptable nvidia-smi topo -m path between any two GPUs "
        "(X < NV# < PIX < PXB < PHB < NODE < SYS); unset: not checked.",
    )
    binding: Literal["nvidia", "vfio-pci"] = Field(
        "nvidia",
        description="The driver every GPU must be bound to: nvidia, or vfio-pci for GPUs passed through "
        "to virtual machines (vfio-pci is then never blacklisted).",
        examples=["nvidia"],
    )


class DriverSpec(Frozen):
    """NVIDIA driver: branch, kernel module flavour, where it comes from, and the lock."""

    branch: StrictInt = Field(ge=450, le=999, description="Driver branch, e.g. 580 (R580).")
    flavor: Literal["open", "proprietary", "auto"] = Field(
        "auto", description="Kernel module flavour; auto picks open for Turing and newer."
    )
    version: Driver | None = Field(
        None, description='Exact driver version, e.g. "580.95.05"; default newest.'
    )
    source: Literal["nvidia-repo", "distro", "preinstalled"] = Field(
        "nvidia-repo",
        description="nvidia-repo: NVIDIA's CUDA repository; distro: the distribution's archive; "
        "preinstalled: provided by the host image, checked but never installed.",
    )
    hold: StrictBool = Field(
        True, description="Hold the NVIDIA stack packages and keep unattended-upgrades away from them."
    )
    console: StrictBool = Field(
        True,
        description="Someone can answer the firmware console at the next boot (MOK enrollment under "
        "Secure Boot); false for headless VMs and remote fleets, where such steps are refused.",
    )
    replace_held: StrictBool = Field(
        False,
        description="Let apply replace an installed, held driver that the spec changes (a flavour or branch "
        "switch removes its packages; a version change releases their holds for one transaction); "
        "`provision apply --replace-held` gives the same consent for one run.",
        examples=[False],
    )
    kernel_guard: Literal["report", "hold"] = Field(
        "report",
        description="A newer installed kernel without the NVIDIA module: report it in the plan, or also "
        "hold the kernel meta-packages so apt cannot bring a kernel the module does not follow.",
        examples=["report"],
    )

    @field_validator("version")
    @classmethod
    def _version_in_branch(cls, version: DriverVersion | None, info: ValidationInfo) -> DriverVersion | None:
        # A field validator, so that an error is located at driver.version, not at driver:.
        # NVIDIA's Linux driver versions have three fields, the last two-digit (580.95.05,
        # 580.126.20); package versions use that exact text, so "580.95" or "580.95.5" match nothing.
        if version is not None and not re.fullmatch(r"\d{3}\.\d{2,3}\.\d{2}", str(version)):
            raise ValueError(f"{version} is not a full driver version such as 580.95.05")
        branch = info.data.get("branch")  # absent when the branch itself failed: reported there
        if version is not None and branch is not None and version.branch != branch:
            raise ValueError(f"{version} is not in branch {branch}")
        return version


class CudaSpec(Frozen):
    """CUDA toolkit release and, optionally, cuDNN and NCCL versions (prefixes allowed)."""

    toolkit: Dotted = Field(description='CUDA toolkit release X.Y, e.g. "13.0".')
    cudnn: Dotted | None = Field(None, description='cuDNN version or prefix, e.g. "9.14" or "9.14.0.64".')
    nccl: Dotted | None = Field(None, description='NCCL version or prefix, e.g. "2.28.3".')

    @field_validator("toolkit")
    @classmethod
    def _toolkit_is_release(cls, toolkit: DottedVersion) -> DottedVersion:
        # A field validator, so that an error is located at cuda.toolkit, not at cuda:.
        if len(toolkit.parts) != 2:
            raise ValueError(f"must be a release X.Y such as 13.0, not {toolkit}")
        return toolkit


class PythonSpec(Frozen):
    """Python virtual environment with a PyTorch wheel from a pinned index."""

    interpreter: Dotted = Field(description='Python X.Y used to create the venv, e.g. "3.12".')
    venv: VenvPath = Field(
        description="Absolute path of the virtual environment, e.g. /opt/torch or /home/you/venv: not a "
        "system or shared directory; apply and verify use it only when root or the invoking user owns it and "
        "no one else may write it."
    )
    torch: Pep440 | None = Field(None, description='PyTorch release, e.g. "2.11.0" (local tag not included).')
    cuda_variant: Annotated[str, Field(pattern=r"^cu\d{3}$")] | None = Field(
        None, description="PyTorch CUDA wheel variant, e.g. cu130."
    )
    index_url: SafeUrl | None = Field(
        None, description="Wheel index; default https://download.pytorch.org/whl/<cuda_variant>."
    )
    packages: tuple[PipRequirement, ...] = Field((), description="Extra pip requirements.")

    @model_validator(mode="after")
    def _torch_needs_variant(self) -> PythonSpec:
        if (self.torch is None) != (self.cuda_variant is None):
            raise ValueError("python.torch and python.cuda_variant go together")
        if self.torch is not None and self.torch.local:
            raise ValueError("write python.torch without a local tag; the variant goes in cuda_variant")
        return self


class BiosItem(Frozen):
    """One manual BIOS or hardware step of the printable checklist."""

    id: Identifier = Field(description="Item id; a catalog item's id replaces that item.")
    title: str = Field(min_length=1, description="The setting or check, as a heading.")
    why: str = Field(min_length=1, description="What goes wrong without it.")
    how: str = Field(min_length=1, description="Where to find it in the BIOS or on the machine.")


class BiosSpec(Frozen):
    """Checklist items: catalog defaults, plus ``items`` (added or replacing by id), minus ``skip``."""

    items: tuple[BiosItem, ...] = Field((), description="Items to add, or to replace catalog items by id.")
    skip: tuple[Identifier, ...] = Field((), description="Ids of catalog items to leave out.")


ThresholdName = Literal[
    "min_h2d_gbps",
    "min_d2h_gbps",
    "min_bf16_tflops",
    "min_p2p_gbps",
    "min_allreduce_busbw_gbps",
    "max_gpu_temp_c",
    "max_memory_temp_c",
]
"""The thresholds of ``verify:`` that ``verify.sources`` may explain."""


class VerifySpec(Frozen):
    """What "working" means. Thresholds left unset come from the catalog's GPU entry."""

    min_h2d_gbps: float | None = Field(None, gt=0, description="Pinned host-to-device GB/s per GPU.")
    max_gpu_temp_c: float | None = Field(
        None,
        gt=0,
        le=120,
        description="Highest GPU core temperature (deg C) under load; unset: the catalog's.",
    )
    max_memory_temp_c: float | None = Field(
        None,
        gt=0,
        le=120,
        description="Highest GPU memory temperature (deg C) under load; unset: the catalog's.",
    )
    min_d2h_gbps: float | None = Field(None, gt=0, description="Pinned device-to-host GB/s per GPU.")
    min_bf16_tflops: float | None = Field(None, gt=0, description="bf16 8192^3 matmul TFLOP/s per GPU.")
    min_p2p_gbps: float | None = Field(None, gt=0, description="GPU-to-GPU copy GB/s per ordered pair.")
    min_allreduce_busbw_gbps: float | None = Field(
        None, gt=0, description="NCCL all-reduce bus bandwidth (nccl-tests busbw), GB/s."
    )
    pcie_gen: StrictInt | None = Field(None, ge=1, le=6, description="PCIe generation required under load.")
    pcie_width: Literal[1, 2, 4, 8, 16] | None = Field(None, description="PCIe lanes required under load.")
    load_seconds: float = Field(5.0, ge=1, le=60, description="bf16 load per GPU (thermals, TFLOP/s).")
    allreduce_timeout_s: float = Field(
        90.0, ge=5, le=600, description="Seconds before a hung all-reduce is killed and failed."
    )
    sources: dict[ThresholdName, str] = Field(
        default_factory=dict,
        description="How each threshold above was derived (printed in verify's source column).",
    )


class RepositorySpec(Frozen):
    """Override of NVIDIA's apt repository (a mirror); still signed, fingerprint pinned."""

    url: SafeUrl = Field(
        description="Base URL holding InRelease for the distro, e.g. .../repos/ubuntu2404/x86_64/."
    )
    key_hosts: tuple[Hostname, ...] = Field(
        (),
        description="Hosts key_url may name besides NVIDIA's developer.download.nvidia.com.",
        examples=[["mirror.example.org"]],
    )
    key_url: SafeUrl | None = Field(
        None, description="https URL of the OpenPGP signing key (binary or armored), on an allowed key host."
    )
    key_file: AbsolutePath | None = Field(
        None,
        description="The signing key as a file on the controller, instead of key_url (air-gapped mirrors).",
        examples=["/etc/provision/keys/cuda-archive.pub"],
    )
    fingerprint: Annotated[str, Field(pattern=r"^[0-9A-F]{40}$")] = Field(
        description="Full 40-hex-digit fingerprint the key must have."
    )

    @field_validator("key_url")
    @classmethod
    def _key_host(cls, value: Url | None, info: ValidationInfo) -> Url | None:
        # key_hosts is declared before key_url, so it is validated first and is in info.data.
        if value is not None and (why := key_url_problem(str(value), info.data.get("key_hosts", ()))):
            raise ValueError(why)
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> RepositorySpec:
        if (self.key_url is None) == (self.key_file is None):
            raise ValueError("give exactly one of repository.key_url and repository.key_file")
        return self


HUB_MODEL_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"
"""A Hugging Face Hub repository id, ``owner/name`` (the Hub's own character set)."""


def _model_ref(value: str) -> str:
    # Either a Hub id or an absolute local directory; both reach vLLM as one argv element.
    if value.startswith("/"):
        return absolute_path(value)
    if not re.fullmatch(HUB_MODEL_ID, value):
        raise ValueError("must be a Hugging Face model id (owner/name) or an absolute directory")
    return value


def _ip_address(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ValueError("must be an IPv4 or IPv6 address, e.g. 127.0.0.1 or 0.0.0.0") from None


WeightFormatId = Literal["fp32", "fp16", "bf16", "fp8", "awq-int4", "gptq-int4"]
"""Weight formats of the catalog's ``serving.yaml`` (bytes per parameter with their sources)."""


class ServeSpec(Frozen):
    """A model served by vLLM's OpenAI-compatible server, checked to fit the GPUs before install."""

    model: Annotated[str, AfterValidator(_model_ref)] = Field(
        description="Hugging Face model id (owner/name) or an absolute directory holding the model.",
        examples=["meta-llama/Llama-3.1-8B-Instruct", "/srv/models/llama-3.1-8b"],
    )
    vllm: Pep440 = Field(
        description='vLLM release, e.g. "0.26.0"; its torch pin must equal python.torch.', examples=["0.26.0"]
    )
    config_json: AbsolutePath | None = Field(
        None,
        description="The model's config.json on this (controller) machine; default <model>/config.json "
        "when model is a directory. Read when the spec is loaded.",
        examples=["/srv/models/llama-3.1-8b/config.json"],
    )
    architecture: ModelArchitecture | None = Field(
        None,
        description="The model's figures, instead of a config.json (a Hub id without a local copy).",
        examples=[
            {
                "layers": 32,
                "attention_heads": 32,
                "kv_heads": 8,
                "head_dim": 128,
                "max_context": 131072,
                "parameters": 8030261248,
            }
        ],
    )
    weights: WeightFormatId = Field(
        "bf16",
        description="Weight format: fp32, fp16, bf16, fp8, awq-int4 or gptq-int4 (a quantized checkpoint).",
        examples=["bf16", "awq-int4"],
    )
    kv_cache_dtype: Literal["auto", "fp8"] = Field(
        "auto", description="vLLM --kv-cache-dtype.", examples=["auto", "fp8"]
    )
    max_context: StrictInt | None = Field(
        None,
        ge=16,
        le=100_000_000,
        description="vLLM --max-model-len, tokens; default the model's trained context.",
        examples=[32768],
    )
    sequences: StrictInt = Field(
        1,
        ge=1,
        le=4096,
        description="Concurrent sequences at full context the KV cache must hold (--max-num-seqs).",
        examples=[8],
    )
    tensor_parallel_size: StrictInt | None = Field(
        None,
        ge=1,
        le=64,
        description="GPUs one instance spans (--tensor-parallel-size); default gpus.count.",
        examples=[2],
    )
    gpu_memory_utilization: float = Field(
        0.9,
        gt=0,
        le=1,
        description="Fraction of each GPU's memory vLLM may use (--gpu-memory-utilization).",
        examples=[0.9],
    )
    served_model_name: Identifier | None = Field(
        None,
        description="Name clients use in requests (--served-model-name); default the model id.",
        examples=["llama-8b"],
    )
    host: Annotated[str, AfterValidator(_ip_address)] = Field(
        "127.0.0.1",
        description="Address the server listens on; 0.0.0.0 exposes it to the network.",
        examples=["127.0.0.1", "0.0.0.0"],
    )
    port: StrictInt = Field(8000, ge=1, le=65535, description="TCP port of the server.", examples=[8000])
    restart: Literal["always", "on-failure"] = Field(
        "on-failure", description="systemd Restart= policy.", examples=["on-failure"]
    )
    index_url: SafeUrl | None = Field(
        None,
        description="Index vllm is installed from (a PyPI mirror); default pip's configured index.",
        examples=["https://pypi.org/simple"],
    )

    @model_validator(mode="after")
    def _architecture_source(self) -> ServeSpec:
        if self.architecture is not None and self.config_json is not None:
            raise ValueError("give serve.architecture or serve.config_json, not both")
        if self.architecture is None and self.config_json is None and not self.model.startswith("/"):
            raise ValueError(
                "a Hub model id needs its figures: write serve.architecture or name a local serve.config_json"
            )
        return self

    def config_path(self) -> str | None:
        """The config.json to read: ``config_json``, else ``<model>/config.json`` for a local model."""
        if self.architecture is not None:
            return None
        return self.config_json or f"{self.model}/config.json"


Port = Annotated[StrictInt, Field(ge=1, le=65535)]
"""A TCP port number."""


ListenAddress = Annotated[str, AfterValidator(_ip_address)]
"""An IP address a service binds to (``0.0.0.0``: every IPv4 address)."""

ScrapeHost = Annotated[
    str,
    Field(
        max_length=253, pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
    ),
]
"""A host name (lower case, dots allowed) or an IPv4 address another machine's exporters answer on."""


class MonitoringSpec(Frozen):
    """GPU monitoring: DCGM 4 and dcgm-exporter from NVIDIA's repository, the distribution's
    node exporter and, on a workstation, the distribution's Prometheus with provision's alert rules.

    Ports default to each project's registered port (dcgm-exporter README: 9400; Prometheus
    default port allocations wiki: node exporter 9100, Prometheus 9090).
    """

    dcgm: Dotted = Field(
        description='DCGM 4 release, e.g. "4.5.3"; the dcgm-exporter release paired with it comes from '
        "the catalog (provision catalog monitoring)."
    )
    dcgm_cuda: StrictInt | None = Field(
        None,
        ge=11,
        le=13,
        description="CUDA major of DCGM's datacenter-gpu-manager-4-cudaNN package; unset: the driver "
        "branch's CUDA major (it must equal it).",
    )
    listen: ListenAddress = Field(
        "0.0.0.0", description="Address the exporters listen on (127.0.0.1: this machine only)."
    )
    exporter_port: Port = Field(9400, description="dcgm-exporter's port.")
    node_exporter_port: Port = Field(9100, description="node exporter's port.")
    prometheus: StrictBool = Field(
        False,
        description="Install Prometheus here with scrape configuration and alert rules (a workstation, "
        "or the fleet's monitoring server); false where a Prometheus already exists.",
    )
    prometheus_listen: ListenAddress = Field("127.0.0.1", description="Address Prometheus listens on.")
    prometheus_port: Port = Field(9090, description="Prometheus's port.")
    scrape_hosts: tuple[ScrapeHost, ...] = Field(
        (),
        description="Other hosts whose exporters this Prometheus scrapes, on the same ports; in a fleet "
        "the inventory's hosts with a monitoring section are added by themselves.",
        examples=[["gpu2.example.org", "gpu3.example.org"]],
    )

    @model_validator(mode="after")
    def _distinct_ports(self) -> MonitoringSpec:
        ports = [self.exporter_port, self.node_exporter_port] + (
            [self.prometheus_port] if self.prometheus else []
        )
        if len(set(ports)) != len(ports):
            raise ValueError("exporter_port, node_exporter_port and prometheus_port must differ")
        return self


IMAGE_REF = r"^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9._-]{1,128})?(@sha256:[0-9a-f]{64})?$"
"""An OCI image reference as the runtimes take it (``ubuntu:24.04``, ``nvcr.io/nvidia/cuda:13.0.0-base``,
``name@sha256:...``): lower-case repository path, optional tag and digest, never an option."""


def _image_or_rootfs(value: str) -> str:
    # One argv element either way: an image present on the host, or (podman) a root filesystem.
    if value.startswith("/"):
        return absolute_path(value)
    if not re.fullmatch(IMAGE_REF, value):
        raise ValueError("must be an image reference (ubuntu:24.04) or an absolute root filesystem directory")
    return value


class ContainersSpec(Frozen):
    """The NVIDIA Container Toolkit for one container runtime; containers get the GPUs through CDI.

    The toolkit's four packages come from NVIDIA's libnvidia-container repository at one exact
    release, pinned and held with the stack (NVIDIA Container Toolkit install guide and release
    notes: the libnvidia-container libraries must match the toolkit exactly since 1.18.0).
    """

    runtime: Literal["docker", "containerd", "podman"] = Field(
        description="The container runtime on the machine: docker and containerd are configured with "
        "nvidia-ctk runtime configure; podman reads the CDI spec as it is.",
        examples=["podman"],
    )
    toolkit: Dotted = Field(
        description='NVIDIA Container Toolkit release X.Y.Z, e.g. "1.18.2"; an unknown one is refused with '
        "the releases the catalog knows.",
        examples=["1.18.2"],
    )
    repository: RepositorySpec | None = Field(
        None,
        description="A mirror of NVIDIA's libnvidia-container repository; unset: NVIDIA's own.",
        examples=[
            {
                "url": "https://mirror.example.org/libnvidia-container/stable/deb/amd64",
                "key_hosts": ["mirror.example.org"],
                "key_url": "https://mirror.example.org/libnvidia-container/gpgkey",
                "fingerprint": "C95B321B61E88C1809C4F759DDCAE044F796ECB0",
            }
        ],
    )
    verify_image: Annotated[str, AfterValidator(_image_or_rootfs)] | None = Field(
        None,
        description="What provision verify runs nvidia-smi -L in: an image already on the host, or for "
        "podman an absolute root filesystem directory (podman run --rootfs); unset: no container is run.",
        examples=["ubuntu:24.04"],
    )

    @field_validator("toolkit")
    @classmethod
    def _exact(cls, value: DottedVersion) -> DottedVersion:
        if len(value.parts) != 3:
            raise ValueError("must be an exact release X.Y.Z (the four packages install at one version)")
        return value


_UUID = r"GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_BUS_ID = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"

GpuSelector = (
    Annotated[StrictInt, Field(ge=0, le=15)] | Annotated[str, Field(pattern=f"^({_UUID}|{_BUS_ID})$")]
)
"""One GPU: nvidia-smi's index, its UUID (``GPU-...``) or its PCI bus id (``0000:41:00.0``)."""

MigProfile = Annotated[str, Field(pattern=r"^[1-8]g\.[0-9]{1,4}gb([+-](me|gfx|me\.all))?$")]
MigConfigName = Annotated[
    str, Field(pattern=r"^all-(balanced|enabled|disabled|[1-8]g\.[0-9]{1,4}gb(\.me)?)$")
]
"""A mig-parted layout name (NVIDIA/mig-parted deployments/systemd/config-default.yaml)."""
"""A MIG GPU instance profile name as nvidia-smi and mig-parted write it (``1g.10gb``, ``1g.18gb+me``)."""


class ClockRange(Frozen):
    """A locked clock range in MHz (``nvidia-smi -lgc MIN,MAX`` / ``-lmc MIN,MAX``)."""

    min_mhz: StrictInt = Field(ge=1, le=10000, description="Lowest clock, MHz.", examples=[1200])
    max_mhz: StrictInt = Field(ge=1, le=10000, description="Highest clock, MHz.", examples=[1410])

    @model_validator(mode="after")
    def _ordered(self) -> ClockRange:
        if self.min_mhz > self.max_mhz:
            raise ValueError(f"min_mhz {self.min_mhz} is above max_mhz {self.max_mhz}")
        return self


class ApplicationClocks(Frozen):
    """Application clocks in MHz (``nvidia-smi -ac MEMORY,GRAPHICS``; deprecated by NVML in favour
    of locked clocks, which docs/gpu-settings.md prefers)."""

    memory_mhz: StrictInt = Field(ge=1, le=10000, description="Memory clock, MHz.", examples=[1512])
    graphics_mhz: StrictInt = Field(ge=1, le=10000, description="Graphics clock, MHz.", examples=[1410])


class GpuSettings(Frozen):
    """Runtime settings for some GPUs; an unset setting is not managed (left as the machine has it)."""

    gpus: Literal["all"] | tuple[GpuSelector, ...] = Field(
        "all", description='"all", or GPUs by index, UUID or PCI bus id.', examples=["all", [0, 1]]
    )
    power_limit_w: StrictInt | None = Field(
        None,
        ge=1,
        le=5000,
        description="Power limit in W (nvidia-smi -pl), within the card's own limits.",
        examples=[250],
    )
    application_clocks: ApplicationClocks | None = Field(
        None,
        description="nvidia-smi -ac MEMORY,GRAPHICS; unset: not managed.",
        examples=[{"memory_mhz": 1512, "graphics_mhz": 1410}],
    )
    locked_gpu_clocks: ClockRange | None = Field(
        None,
        description="nvidia-smi -lgc MIN,MAX; unset: not managed.",
        examples=[{"min_mhz": 1200, "max_mhz": 1410}],
    )
    locked_memory_clocks: ClockRange | None = Field(
        None,
        description="nvidia-smi -lmc MIN,MAX; unset: not managed.",
        examples=[{"min_mhz": 1512, "max_mhz": 1512}],
    )
    compute_mode: Literal["Default", "Exclusive_Process", "Prohibited"] | None = Field(
        None, description="nvidia-smi -c; unset: not managed.", examples=["Exclusive_Process"]
    )
    ecc: StrictBool | None = Field(
        None, description="ECC on or off (nvidia-smi -e; takes effect at the next reboot).", examples=[True]
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, int | str) and value != "all" else value

    def managed(self) -> tuple[str, ...]:
        """The names of the settings this group sets."""
        names = ("power_limit_w", "application_clocks", "locked_gpu_clocks", "locked_memory_clocks")
        return tuple(n for n in (*names, "compute_mode", "ecc") if getattr(self, n) is not None)


class MigLayout(Frozen):
    """MIG for some GPUs, mig-parted style: MIG mode on with these GPU instances (each with one
    compute instance), or off (whole GPUs)."""

    gpus: Literal["all"] | tuple[GpuSelector, ...] = Field(
        "all", description='"all", or GPUs by index, UUID or PCI bus id.', examples=[[0, 1]]
    )
    enabled: StrictBool = Field(
        True, description="MIG mode on; false: whole GPUs (MIG mode off).", examples=[True]
    )
    layout: dict[MigProfile, Annotated[StrictInt, Field(ge=1, le=8)]] = Field(
        default_factory=dict,
        description='GPU instance profile -> count, e.g. {"1g.18gb": 7}; empty with enabled: MIG mode on, '
        "no instances.",
        examples=[{"1g.10gb": 7}, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}],
    )
    config: MigConfigName | None = Field(
        None,
        description="A named layout of NVIDIA's mig-parted default configuration instead of layout: "
        "all-balanced, all-<profile> (as many as fit), all-<profile>.me, all-enabled or all-disabled; "
        "resolved per GPU product from the catalog.",
        examples=["all-balanced"],
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, int | str) and value != "all" else value

    @model_validator(mode="after")
    def _layout_needs_mig(self) -> MigLayout:
        if not self.enabled and (self.layout or self.config):
            raise ValueError("a layout needs enabled: true (whole GPUs have no MIG instances)")
        if self.layout and self.config:
            raise ValueError("give either layout or config, not both")
        return self


class GpuSection(Frozen):
    """The GPUs' runtime state: the persistence daemon, power, clocks, compute mode, ECC and MIG.

    Applied by the ``gpu_settings`` role with nvidia-smi and again at every boot by
    ``provision-gpu-settings.service`` (after nvidia-persistenced); checked against each card's
    own NVML limits read by detection. See docs/gpu-settings.md.
    """

    persistence: StrictBool | None = Field(
        None,
        description="nvidia-persistenced enabled and running (true) or stopped and disabled (false); unset: "
        "not managed. NVIDIA recommends the daemon over the legacy nvidia-smi -pm.",
        examples=[True],
    )
    settings: tuple[GpuSettings, ...] = Field(
        (), description="Settings per group of GPUs.", examples=[[{"gpus": "all", "power_limit_w": 250}]]
    )
    mig: tuple[MigLayout, ...] = Field(
        (),
        description="MIG per group of GPUs; unset: MIG not managed.",
        examples=[[{"gpus": [0], "layout": {"1g.10gb": 7}}, {"gpus": [1], "enabled": False}]],
    )

    @field_validator("settings", "mig", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, dict) else value


class Spec(Frozen):
    """One GPU machine's wanted software stack, spec format version 1."""

    schema_version: Literal[1] = Field(1, description="Spec format version; 1 is the only one.")
    name: Identifier = Field(description="Short name of the machine type; names run directories.")
    description: str = Field("", description="Free text shown in the checklist's header.")
    os: OsSpec = Field(description="The operating system the machine runs.")
    gpus: GpuSpec = Field(description="The GPUs the machine has.")
    driver: DriverSpec = Field(description="The NVIDIA driver to install and hold.")
    cuda: CudaSpec | None = Field(None, description="CUDA toolkit, cuDNN and NCCL; unset: none installed.")
    fabric_manager: Literal["auto", "required", "disabled"] = Field(
        "auto", description="NVIDIA Fabric Manager: auto installs it when NVSwitch is detected."
    )
    python: PythonSpec | None = Field(None, description="A venv with PyTorch; unset: none made.")
    repository: RepositorySpec | None = Field(
        None, description="A mirror of NVIDIA's repository; unset: NVIDIA's own, from the catalog."
    )
    bios: BiosSpec = Field(BiosSpec(), description="Changes to the printable BIOS and hardware checklist.")
    verify: VerifySpec = Field(VerifySpec(), description="Thresholds for `provision verify`.")
    serve: ServeSpec | None = Field(None, description="A model served with vLLM; unset: nothing served.")
    monitoring: MonitoringSpec | None = Field(
        None, description="GPU monitoring (DCGM, dcgm-exporter, node exporter, Prometheus); unset: none."
    )
    containers: ContainersSpec | None = Field(
        None, description="The NVIDIA Container Toolkit and CDI for a container runtime; unset: none."
    )
    gpu: GpuSection | None = Field(
        None, description="GPU runtime settings and MIG layout (docs/gpu-settings.md); unset: not managed."
    )
