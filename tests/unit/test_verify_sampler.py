"""verify's GPU sampler (one long-running nvidia-smi per load) and its progress while loads run.

The stand-in nvidia-smi replays, in nvidia-smi's own ``--format=csv,noheader,nounits`` form, the
samples recorded on the lent H200 during its bf16 load
(``tests/fixtures/verify/h200-ubuntu2404/inputs.json``), one line per ``--loop-ms`` period, and
logs each start, so the tests see how many processes the sampler started.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from provision.verify import launch
from provision.verify.gpuload import PROGRESS, SAMPLE_FIELDS, Sampler, parse_sample

ROOT = Path(__file__).resolve().parents[2]
INPUTS = ROOT / "tests" / "fixtures" / "verify" / "h200-ubuntu2404" / "inputs.json"
KEYS = [f.replace(".", "_") for f in SAMPLE_FIELDS]


def recorded() -> list[dict[str, float]]:
    """The H200's samples of its bf16 load."""
    gpu = json.loads(INPUTS.read_text(encoding="utf-8"))["gpu_run"]["gpus"][0]
    phase = next(p for p in gpu["phases"] if p["phase"] == "bf16-matmul")
    return [dict(s) for s in phase["samples"]]


def csv_line(sample: dict[str, float]) -> str:
    return ", ".join(f"{sample[k]:g}" if k != "index" else str(int(sample[k])) for k in KEYS)


@pytest.fixture
def fake_smi(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in nvidia-smi replaying the recorded lines; returns (program, its start log)."""
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(csv_line(s) + "\n" for s in recorded()), encoding="utf-8")
    log = tmp_path / "starts.log"
    program = tmp_path / "nvidia-smi"
    program.write_text(  # one process, no children: terminating it ends everything it did
        f"#!{sys.executable}\n"
        "import sys, time\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "ms = next(int(a.split('=')[1]) for a in sys.argv if a.startswith('--loop-ms='))\n"
        f"for line in open({str(lines)!r}):\n"
        "    print(line, end='', flush=True)\n"
        "    time.sleep(ms / 1000)\n"
        "time.sleep(60)\n",
        encoding="utf-8",
    )
    program.chmod(0o755)
    return program, log


def _until(ready: Callable[[], bool], within_s: float = 60) -> None:
    """Wait for ``ready()``: an event, not a duration, so that a loaded machine only makes it later."""
    deadline = time.monotonic() + within_s
    while not ready():
        assert time.monotonic() < deadline, f"not ready within {within_s} s"
        time.sleep(0.01)


def test_one_process_samples_the_whole_load(fake_smi: tuple[Path, Path]) -> None:
    program, log = fake_smi
    with Sampler(0, period_s=0.02, nvidia_smi=str(program)) as sampler:
        _until(lambda: len(sampler.samples) >= 5)  # the load: as long as five samples take here
    assert sampler.error is None
    assert sampler.samples == recorded()[: len(sampler.samples)] and len(sampler.samples) >= 5
    starts = log.read_text(encoding="utf-8").splitlines()
    assert len(starts) == 1 and "--loop-ms=20" in starts[0] and "-i 0" in starts[0]


def test_the_sampler_leaves_no_process_behind(fake_smi: tuple[Path, Path]) -> None:
    program, _ = fake_smi
    with Sampler(0, period_s=0.02, nvidia_smi=str(program)) as sampler:
        time.sleep(0.1)
    assert sampler._proc is not None and sampler._proc.poll() is not None


def test_a_failing_nvidia_smi_is_the_phase_error(tmp_path: Path) -> None:
    program = tmp_path / "nvidia-smi"
    program.write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n", encoding="utf-8")
    program.chmod(0o755)
    with Sampler(0, nvidia_smi=str(program)) as sampler:
        _until(lambda: sampler._proc is not None and sampler._proc.poll() is not None)  # it exited
    assert sampler.samples == [] and sampler.error == "nvidia-smi exited 6: No devices were found"


def test_a_missing_nvidia_smi_is_the_phase_error(tmp_path: Path) -> None:
    with Sampler(0, nvidia_smi=str(tmp_path / "absent")) as sampler:
        pass
    assert sampler.error is not None and sampler.error.startswith("nvidia-smi: ")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("0, 5, 16, 51, 39, 414.38, 1515", 6),
        ("0, 5, 16, 51, [N/A], 414.38, 1515", None),
        ("No devices were found", "none"),
        ("", "none"),
    ],
)
def test_sample_lines(line: str, expected: object) -> None:
    sample = parse_sample(line)
    if expected == "none":
        assert sample is None
    elif expected is None:
        assert sample is not None and sample["temperature_memory"] is None
    else:
        assert sample is not None and sample["clocks_sm"] == 1515.0 and sample["power_draw"] == 414.38


CHILD = f"""
import sys, time
print("some torch warning", file=sys.stderr, flush=True)
print("{PROGRESS} GPU 0 (NVIDIA H200): checked product and pinned copies", file=sys.stderr, flush=True)
time.sleep(0.6)
print("{PROGRESS} GPU 0: bf16 load for 5 s", file=sys.stderr, flush=True)
time.sleep(0.6)
print('{{"mode": "gpus"}}')
"""


def _child(tmp_path: Path, program: str) -> tuple[subprocess.Popen[bytes], Path]:
    proc, _out, err = launch._start([sys.executable, "-c", program], tmp_path, "gpus")
    return proc, err


def test_progress_is_shown_while_the_program_runs(tmp_path: Path) -> None:
    """The child goes on only once the parent has shown its first progress line (the callback writes
    a file the child waits for): progress read only after the run would leave the child waiting
    and exiting 7. No wall-clock bound, so load cannot fail it."""
    shown = tmp_path / "shown"
    waiting = CHILD.replace(
        "time.sleep(0.6)",
        f"import os\nfor _ in range(6000):\n    if os.path.exists({str(shown)!r}): break\n"
        "    time.sleep(0.01)\nelse:\n    sys.exit(7)",
        1,
    )
    seen: list[str] = []

    def show(text: str) -> None:
        seen.append(text)
        shown.touch()

    proc, err = _child(tmp_path, waiting)
    assert launch.wait_watching(proc, 120, err, show)
    assert proc.returncode == 0, "the first progress line was not shown while the program ran"
    assert seen == ["GPU 0 (NVIDIA H200): checked product and pinned copies", "GPU 0: bf16 load for 5 s"]


def test_a_program_past_its_deadline_is_killed_and_its_progress_kept(tmp_path: Path) -> None:
    seen: list[str] = []
    proc, err = _child(tmp_path, CHILD.replace("time.sleep(0.6)", "time.sleep(30)", 1))
    _until(lambda: PROGRESS in err.read_text(encoding="utf-8"))  # it started, however loaded the machine
    assert not launch.wait_watching(proc, 1.0, err, seen.append)
    assert proc.returncode is not None and seen == ["GPU 0 (NVIDIA H200): checked product and pinned copies"]
