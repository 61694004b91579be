"""The systemd unit of vLLM's OpenAI-compatible server, rendered from argv data in Python.

No template engine sees a spec value: :func:`server_argv` builds the command as a list, and
:func:`exec_start` quotes each element for systemd's own command-line syntax (systemd.service(5),
"Command lines": double quotes with C-style escapes, ``$$`` for a literal dollar; systemd.unit(5),
"Specifiers": ``%%`` for a literal percent). Control characters are refused, never escaped.

Server flags: ``vllm serve MODEL`` with ``--host``, ``--port``, ``--tensor-parallel-size``,
``--gpu-memory-utilization``, ``--max-model-len``, ``--max-num-seqs``, ``--dtype``,
``--quantization``, ``--kv-cache-dtype``, ``--served-model-name`` (vLLM documentation, ``vllm serve``
and engine arguments, https://docs.vllm.ai/en/latest/cli/serve.html).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from provision.catalog.serving import ServingData

UNIT_PATH = "/etc/systemd/system/provision-vllm.service"
"""Where provision writes the vLLM server's unit (systemd.unit(5): the system unit search path);
detection reads it back (:mod:`provision.detect.domains.service`)."""
STATE_DIR = "/var/lib/provision-vllm"
"""The service's StateDirectory: its HOME, the Hugging Face cache and vLLM's compile caches."""

NCCL_ENV = {
    # NVLink multicast off, as provision's own GPU runs (verify/launch.py): the shared machines
    # require it; CUDA devices numbered in PCI bus order so that vLLM's index is nvidia-smi's.
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
}

_PLAIN = re.compile(r"[A-Za-z0-9._/:=+,@-]+")


@dataclass(frozen=True)
class ServerConfig:
    """What the unit runs, as plain values (built from the spec's ``serve:`` by the serve component).

    Attributes:
        venv: The venv holding vLLM (``<venv>/bin/vllm``).
        model: Hub id or absolute directory.
        max_context: ``--max-model-len``; None leaves vLLM's default (the model's own).
        weights: A ``serving.yaml`` weight format id (chooses ``--dtype`` and ``--quantization``).
    """

    venv: str
    model: str
    served_name: str
    host: str
    port: int
    tensor_parallel: int
    utilization: float
    max_context: int | None
    sequences: int
    weights: str
    kv_cache_dtype: str
    restart: str


def systemd_quote(arg: str) -> str:
    """One argv element in systemd's command-line syntax.

    Raises:
        ValueError: ``arg`` holds a control character (a newline would end the directive).
    """
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in arg):
        raise ValueError(f"control character in a command-line argument: {arg!r}")
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if _PLAIN.fullmatch(arg):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_start(argv: tuple[str, ...]) -> str:
    """``ExecStart=`` value for ``argv`` (each element quoted on its own)."""
    return " ".join(systemd_quote(a) for a in argv)


def server_argv(cfg: ServerConfig, data: ServingData) -> tuple[str, ...]:
    """``<venv>/bin/vllm serve MODEL --flag value ...``; every value a separate element."""
    fmt = data.weight(cfg.weights)
    argv = [
        f"{cfg.venv}/bin/vllm",
        "serve",
        cfg.model,
        "--host",
        cfg.host,
        "--port",
        str(cfg.port),
        "--tensor-parallel-size",
        str(cfg.tensor_parallel),
        "--gpu-memory-utilization",
        f"{cfg.utilization:g}",
        "--max-num-seqs",
        str(cfg.sequences),
        "--dtype",
        fmt.vllm_dtype,
        "--kv-cache-dtype",
        cfg.kv_cache_dtype,
        "--served-model-name",
        cfg.served_name,
    ]
    if cfg.max_context is not None:
        argv += ["--max-model-len", str(cfg.max_context)]
    if fmt.vllm_quantization is not None:
        argv += ["--quantization", fmt.vllm_quantization]
    return tuple(argv)


def environment(cfg: ServerConfig) -> dict[str, str]:
    """The service's environment: NCCL settings, HOME and caches in the state directory, offline hub
    access for a local model."""
    env = {**NCCL_ENV, "HOME": STATE_DIR, "HF_HOME": f"{STATE_DIR}/huggingface", "PYTHONUNBUFFERED": "1"}
    if cfg.model.startswith("/"):
        env["HF_HUB_OFFLINE"] = "1"
    return env


def unit_text(cfg: ServerConfig, data: ServingData) -> str:
    """The whole unit file. The service runs as a dynamic user (systemd.exec(5) ``DynamicUser=``),
    never root, with its HOME in ``StateDirectory=``."""
    env = "".join(f"Environment={systemd_quote(f'{k}={v}')}\n" for k, v in environment(cfg).items())
    return (
        "# Written by provision from the spec's serve: section; edits are replaced on the next apply.\n"
        "[Unit]\n"
        "Description=vLLM OpenAI-compatible server (provision)\n"
        "Documentation=https://docs.vllm.ai/en/latest/cli/serve.html\n"
        "Wants=network-online.target\n"
        "After=network-online.target nvidia-persistenced.service\n"
        "\n[Service]\n"
        "Type=simple\n"
        "DynamicUser=yes\n"
        "StateDirectory=provision-vllm\n"
        f"WorkingDirectory={STATE_DIR}\n"
        f"{env}"
        f"ExecStart={exec_start(server_argv(cfg, data))}\n"
        f"Restart={cfg.restart}\n"
        "RestartSec=10\n"
        "TimeoutStopSec=60\n"
        "\n[Install]\n"
        "WantedBy=multi-user.target\n"
    )
