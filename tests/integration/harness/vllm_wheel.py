"""A stand-in of the vLLM wheel on PyPI, published as a PEP 503 index by the session's http server.

The wheel mirrors the real one where provision depends on it: the distribution name ``vllm``, the
version, ``Requires-Python: >=3.10,<3.15`` and ``Requires-Dist: torch==2.11.0``, which are what
vLLM 0.26.0's wheel on PyPI declares (its METADATA, https://pypi.org/project/vllm/0.26.0/), and a
``vllm`` console script (``vllm serve ...``), which pip writes to ``<venv>/bin/vllm`` as it does for
the real wheel. It holds no engine: running it prints its argv and exits. It is a stand-in because
the real wheel is 336 MB of CUDA code that cannot run without a GPU.
"""

from __future__ import annotations

import hashlib
import html
import zipfile
from pathlib import Path

from tests.integration.harness.wheels import _digest, _page

VERSION = "0.26.0"
TORCH_PIN = "2.11.0"


def build_vllm_wheel(out_dir: Path, version: str = VERSION, torch: str = TORCH_PIN) -> Path:
    """Write ``vllm-<version>-py3-none-any.whl`` requiring ``torch==<torch>``."""
    dist_info = f"vllm-{version}.dist-info"
    members = {
        "vllm/__init__.py": f"__version__ = {version!r}\n",
        "vllm/cli.py": "import sys\n\n\ndef main() -> None:\n    print('stand-in vllm', *sys.argv[1:])\n",
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
            "Summary: Stand-in of vLLM for provision's integration tests\n"
            f"Requires-Python: >=3.10,<3.15\nRequires-Dist: torch=={torch}\n"
        ),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: provision-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{dist_info}/entry_points.txt": "[console_scripts]\nvllm = vllm.cli:main\n",
    }
    record = [f"{path},{_digest(text.encode())},{len(text.encode())}" for path, text in members.items()]
    members[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    wheel = out_dir / f"vllm-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in members.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), text)
    return wheel


def publish_pypi(root: Path) -> str:
    """Build ``root/pypi/simple/vllm/`` (the stand-in wheel and its page); returns the index's URL path."""
    project = root / "pypi" / "simple" / "vllm"
    project.mkdir(parents=True, exist_ok=True)
    wheel = build_vllm_wheel(project)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    name = html.escape(wheel.name)
    link = f'<a href="/pypi/simple/vllm/{name}#sha256={digest}">{name}</a><br/>\n'
    (project / "index.html").write_text(_page("Links for vllm", link))
    (root / "pypi" / "simple" / "index.html").write_text(
        _page("Simple index", '<a href="vllm/">vllm</a><br/>\n')
    )
    return "/pypi/simple/"
