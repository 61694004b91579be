"""A stand-in PyTorch wheel index (PEP 503), laid out like download.pytorch.org.

``<served root>/whl/<variant>/index.html`` lists projects; ``/whl/<variant>/torch/`` lists the
wheels, which sit at ``/whl/<variant>/torch-<version>-py3-none-any.whl`` with a ``#sha256=``
fragment, as the real index does. pip installs from it with
``--index-url http://127.0.0.1:PORT/whl/cu130/`` (plain http to 127.0.0.1 needs no
``--trusted-host``: pip treats localhost as secure).

The wheels are tiny but real: written with :mod:`zipfile`, with ``METADATA``, ``WHEEL`` and a
``RECORD`` of urlsafe-base64 sha256 digests. ``torch/version.py`` has the shape of real torch's
generated file (``__version__``, ``cuda``, ``git_version``, ``hip``, ``debug``); ``torch.cuda``
answers ``is_available() -> False``. No ``Requires-Dist``: nothing else (numpy...) is pulled in.
"""

from __future__ import annotations

import base64
import hashlib
import html
import zipfile
from pathlib import Path

#: variant -> torch versions published under /whl/<variant>/ (cu130 from torch 2.9: pytorch/pytorch
#: RELEASE.md, "PyTorch CUDA Support Matrix", https://github.com/pytorch/pytorch/blob/main/RELEASE.md).
TORCH_WHEELS = {"cu130": ("2.11.0+cu130", "2.10.0+cu130"), "cu128": ("2.11.0+cu128",)}
CUDA_OF_VARIANT = {"cu130": "13.0", "cu128": "12.8", "cu126": "12.6"}


def torch_files(version: str) -> dict[str, str]:
    """Source files of the stand-in ``torch`` package at ``version`` (e.g. ``2.11.0+cu130``)."""
    variant = version.split("+")[1]
    return {
        "torch/__init__.py": f"from torch import cuda, version\n\n__version__ = {version!r}\n",
        "torch/version.py": (
            "from typing import Optional\n\n"
            "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n"
            f"__version__ = {version!r}\n"
            "debug = False\n"
            f"cuda: Optional[str] = {CUDA_OF_VARIANT[variant]!r}\n"
            "git_version = '0000000000000000000000000000000000000000'\n"
            "hip: Optional[str] = None\n"
            "xpu: Optional[str] = None\n"
        ),
        "torch/cuda/__init__.py": (
            "def is_available() -> bool:\n    return False\n\n\ndef device_count() -> int:\n    return 0\n"
        ),
    }


def build_wheel(name: str, version: str, files: dict[str, str], out_dir: Path) -> Path:
    """Write ``<name>-<version>-py3-none-any.whl`` holding ``files`` and its dist-info."""
    dist_info = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        "Summary: Stand-in for provision's integration tests\nRequires-Python: >=3.9\n"
    )
    members[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: provision-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{path},{_digest(text.encode())},{len(text.encode())}" for path, text in members.items()]
    members[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    wheel = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in members.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), text)
    return wheel


def build_index(root: Path) -> dict[str, str]:
    """Build ``root/whl/<variant>/`` for every variant; returns variant -> URL path."""
    paths = {}
    for variant, versions in TORCH_WHEELS.items():
        variant_dir = root / "whl" / variant
        (variant_dir / "torch").mkdir(parents=True, exist_ok=True)
        wheels = [build_wheel("torch", v, torch_files(v), variant_dir) for v in versions]
        links = "".join(
            f'<a href="/whl/{variant}/{html.escape(w.name.replace("+", "%2B"))}'
            f'#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{html.escape(w.name)}</a><br/>\n'
            for w in wheels
        )
        (variant_dir / "torch" / "index.html").write_text(_page("Links for torch", links))
        (variant_dir / "index.html").write_text(_page("Simple index", '<a href="torch/">torch</a><br/>\n'))
        paths[variant] = f"/whl/{variant}/"
    return paths


def _page(title: str, body: str) -> str:
    return f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>\n{body}</body></html>\n"


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
