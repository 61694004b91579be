"""GPU load program of ``provision verify``: runs in the spec's venv and prints one JSON document.

Standalone on purpose: it imports only the standard library and torch, so it runs under the
venv's interpreter whatever interpreter provision itself uses (provision launches it with
``<venv>/bin/python -I gpuload.py ...`` and parses the JSON). It never raises past ``main``:
every failure becomes an ``error`` string in the output.

Modes:
    gpus: per GPU, a checked fp32 matrix product, a timed bf16 8192^3 matrix product (the
        thermal load), pinned host<->device copies, with ``nvidia-smi`` sampled during each load
        (PCIe links train down at idle, FF-16); with two or more GPUs, the P2P access matrix and
        the copy bandwidth of every ordered pair.
    allreduce: one rank of an all-reduce across ``--world`` processes (provision starts one per
        GPU). ``--hang`` makes the last rank sleep instead of joining, to test timeout handling.

Units: bandwidth in GB/s (1e9 bytes per second), compute in TFLOP/s (1e12), seconds, degrees C.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import Any

MIB = 1 << 20
SAMPLE_FIELDS = (
    "index",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "clocks.sm",
)
"""nvidia-smi fields sampled during a load; the keys of a sample, dots replaced by underscores."""

PROGRESS = "provision-progress:"
"""Prefix of the progress lines written to stderr while the loads run (provision shows them)."""


def progress(text: str) -> None:
    """Say on stderr what runs now (``provision-progress: <text>``); stdout keeps the one JSON document."""
    print(f"{PROGRESS} {text}", file=sys.stderr, flush=True)


MATMUL_N = 8192
"""Square size of the timed bf16 product (the figure NVIDIA and the H200 bench.txt quote)."""


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None  # [N/A], [Not Supported]


class Sampler:
    """Samples one GPU while a load runs, through one long-running ``nvidia-smi --query-gpu ...
    --loop-ms`` process (one line per period) rather than a new process every period.

    Args:
        index: nvidia-smi's GPU index.
        period_s: Seconds between samples (nvidia-smi's ``--loop-ms``, in ms).
        nvidia_smi: The program (tests point it at a recorded stand-in).
    """

    def __init__(self, index: int, period_s: float = 0.25, nvidia_smi: str = "nvidia-smi") -> None:
        self.index, self.period_s, self.nvidia_smi = index, period_s, nvidia_smi
        self.samples: list[dict[str, Any]] = []
        self.error: str | None = None
        self._other: list[str] = []
        self._proc: subprocess.Popen[str] | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)

    def argv(self) -> list[str]:
        """The sampler's command line."""
        query = "--query-gpu=" + ",".join(SAMPLE_FIELDS)
        loop = f"--loop-ms={max(1, round(self.period_s * 1000))}"
        return [self.nvidia_smi, query, "--format=csv,noheader,nounits", "-i", str(self.index), loop]

    def __enter__(self) -> Sampler:
        try:
            self._proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        except OSError as exc:
            self.error = f"nvidia-smi: {exc}"
            return self
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._thread.join(timeout=10)
        if proc.returncode not in (0, -signal.SIGTERM) and not self.samples:
            said = " ".join(self._other).strip()[:200]
            self.error = f"nvidia-smi exited {proc.returncode}: {said}"

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            sample = parse_sample(line)
            if sample is None:
                self._other.append(line.strip())
            else:
                self.samples.append(sample)

    def report(self, phase: str) -> dict[str, Any]:
        return {"phase": phase, "samples": self.samples, "error": self.error}


def parse_sample(line: str) -> dict[str, Any] | None:
    """One ``--query-gpu`` CSV line (no header, no units) as a sample; None for any other line."""
    values = [_number(v) for v in line.strip().split(",")]
    if len(values) != len(SAMPLE_FIELDS) or values[0] is None:
        return None
    return dict(zip((f.replace(".", "_") for f in SAMPLE_FIELDS), values, strict=True))


def _card_limits(index: int) -> dict[str, float | None]:
    """The card's own temperature limits, where this nvidia-smi knows the field (best effort).

    ``temperature.gpu.tlimit`` is the margin to the GPU's maximum operating temperature, so the
    limit is ``temperature.gpu + tlimit`` (nvidia-smi -q "GPU T.Limit Temp").
    """
    argv = [
        "nvidia-smi",
        "--query-gpu=temperature.gpu,temperature.gpu.tlimit",
        "--format=csv,noheader,nounits",
    ]
    try:
        out = subprocess.run([*argv, "-i", str(index)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return {"gpu_max_operating_c": None}
    parts = [_number(v) for v in out.stdout.strip().split(",")] if out.returncode == 0 else []
    if len(parts) == 2 and parts[0] is not None and parts[1] is not None:
        return {"gpu_max_operating_c": parts[0] + parts[1]}
    return {"gpu_max_operating_c": None}


def checked_matmul(torch: Any, device: Any) -> float:
    """Relative error of a 512^3 fp32 product on ``device`` against a float64 CPU reference."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(512, 512, generator=gen), torch.randn(512, 512, generator=gen)
    ref = a.double() @ b.double()
    got = (a.to(device) @ b.to(device)).double().cpu()
    return float(((got - ref).abs().max() / ref.abs().max()).item())


def bf16_load(torch: Any, device: Any, seconds: float) -> dict[str, Any]:
    """Run 8192^3 bf16 products for ``seconds``; TFLOP/s over the timed loop, result spot-checked."""
    a = torch.randn(MATMUL_N, MATMUL_N, device=device, dtype=torch.bfloat16)
    b = torch.randn(MATMUL_N, MATMUL_N, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        c = a @ b
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    iters, t0 = 0, time.monotonic()
    start.record()
    while time.monotonic() - t0 < seconds:
        for _ in range(10):
            c = a @ b
        iters += 10
        torch.cuda.synchronize(device)
    end.record()
    torch.cuda.synchronize(device)
    elapsed = start.elapsed_time(end) / 1e3
    ref = a[:64].float() @ b.float()
    err = float(((c[:64].float() - ref).abs().max() / ref.abs().max()).item())
    return {"bf16_tflops": 2 * MATMUL_N**3 * iters / elapsed / 1e12, "bf16_rel_error": err, "iters": iters}


def copy_gbps(torch: Any, dst: Any, src: Any, seconds: float) -> float:
    """GB/s of repeated ``dst.copy_(src)`` for about ``seconds`` (CUDA events around the loop)."""
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    iters, t0 = 0, time.monotonic()
    start.record()
    while time.monotonic() - t0 < seconds:
        for _ in range(4):
            dst.copy_(src, non_blocking=True)
        iters += 4
        torch.cuda.synchronize()
    end.record()
    torch.cuda.synchronize()
    return float(src.numel() * src.element_size() * iters / (start.elapsed_time(end) / 1e3) / 1e9)


def one_gpu(torch: Any, index: int, seconds: float, nbytes: int) -> dict[str, Any]:
    """Every single-GPU measurement of GPU ``index``; ``error`` set when one fails."""
    props = torch.cuda.get_device_properties(index)
    out: dict[str, Any] = {"index": index, "name": props.name, "cc": f"{props.major}.{props.minor}"}
    out |= {"total_memory_bytes": int(props.total_memory), "phases": [], "error": None}
    device = torch.device("cuda", index)
    try:
        torch.cuda.set_device(device)
        progress(f"GPU {index} ({props.name}): checked product and pinned copies")
        out["ones_sum"] = float(torch.ones(1, device=device).sum().item())
        out["fp32_rel_error"] = checked_matmul(torch, device)
        out |= _copies(torch, index, device, max(1.0, seconds / 4), nbytes, out["phases"])
        progress(f"GPU {index}: bf16 load for {seconds:g} s")
        with Sampler(index) as sampler:
            out |= bf16_load(torch, device, seconds)
        out["phases"].append(sampler.report("bf16-matmul"))
        out |= _card_limits(index)
    except Exception as exc:  # report, never crash: the parent turns this into a failed check
        out["error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        torch.cuda.empty_cache()
    return out


def _copies(
    torch: Any, index: int, device: Any, seconds: float, nbytes: int, phases: list[dict[str, Any]]
) -> dict[str, float]:
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    with Sampler(index) as h2d_sampler:
        h2d = copy_gbps(torch, dev, host, seconds)
    with Sampler(index) as d2h_sampler:
        d2h = copy_gbps(torch, host, dev, seconds)
    phases += [h2d_sampler.report("h2d-copy"), d2h_sampler.report("d2h-copy")]
    return {"h2d_gbps": h2d, "d2h_gbps": d2h}


def p2p(torch: Any, count: int, nbytes: int) -> dict[str, Any]:
    """P2P access matrix and copy GB/s of every ordered pair (i -> j, buffers on both GPUs)."""
    access = [
        [i == j or bool(torch.cuda.can_device_access_peer(i, j)) for j in range(count)] for i in range(count)
    ]
    bandwidth: dict[str, float] = {}
    errors: dict[str, str] = {}
    for i in range(count):
        for j in range(count):
            if i == j:
                continue
            try:
                bandwidth[f"{i}-{j}"] = _pair_gbps(torch, i, j, nbytes)
            except Exception as exc:  # one broken pair must not hide the others
                errors[f"{i}-{j}"] = f"{type(exc).__name__}: {exc}"[:300]
    return {"access": access, "bandwidth_gbps": bandwidth, "errors": errors}


def _pair_gbps(torch: Any, src: int, dst: int, nbytes: int, iters: int = 10) -> float:
    a = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{src}")
    b = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{dst}")
    b.copy_(a)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    t0 = time.perf_counter()
    for _ in range(iters):
        b.copy_(a, non_blocking=True)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    return nbytes * iters / (time.perf_counter() - t0) / 1e9


def versions(torch: Any) -> dict[str, Any]:
    """torch, its CUDA build, the driver's CUDA version, cuDNN and NCCL as torch sees them."""
    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    out["driver_cuda"] = _safe(lambda: int(torch._C._cuda_getDriverVersion())) or driver_cuda_version()
    out["cudnn"] = _safe(lambda: torch.backends.cudnn.version())
    out["nccl"] = _safe(lambda: ".".join(str(p) for p in torch.cuda.nccl.version()))
    out["arch_list"] = _safe(lambda: list(torch.cuda.get_arch_list())) or []
    return out


def driver_cuda_version() -> int | None:
    """``cuDriverGetVersion`` from libcuda through ctypes (13000 for CUDA 13.0); None without a driver."""
    import ctypes

    try:
        lib = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        return int(version.value) if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 else None
    except OSError:
        return None


def _safe(read: Any) -> Any:
    try:
        return read()
    except Exception:  # a CPU build has no cuDNN or NCCL: None says "unknown"
        return None


def gpus_mode(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 check compares against float64
    out: dict[str, Any] = {"mode": "gpus", "error": None, "gpus": [], "p2p": None}
    out |= versions(torch)
    out["available"] = bool(torch.cuda.is_available())
    out["device_count"] = int(torch.cuda.device_count()) if out["available"] else 0
    if not out["available"]:
        out["error"] = "torch.cuda.is_available() is False"
        return out
    nbytes = args.copy_mib * MIB
    out["gpus"] = [one_gpu(torch, i, args.seconds, nbytes) for i in range(out["device_count"])]
    if out["device_count"] >= 2:
        progress(f"P2P access and copies between {out['device_count']} GPUs")
        out["p2p"] = p2p(torch, out["device_count"], nbytes)
    return out


def allreduce_mode(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    out: dict[str, Any] = {"mode": "allreduce", "rank": args.rank, "world": args.world, "error": None}
    out |= {"backend": args.backend, "bytes": args.mib * MIB, "iters": args.iters}
    device = torch.device("cuda", args.rank) if args.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        args.backend,
        init_method=f"file://{args.init_file}",
        rank=args.rank,
        world_size=args.world,
        timeout=timedelta(seconds=args.timeout),
    )
    try:
        if args.hang and args.rank == args.world - 1:
            time.sleep(10**6)  # a rank that never joins: the others block until provision kills them
        out |= _timed_allreduce(torch, dist, device, args)
    finally:
        dist.destroy_process_group()
    return out


def _timed_allreduce(torch: Any, dist: Any, device: Any, args: argparse.Namespace) -> dict[str, Any]:
    check = torch.full((1024,), float(args.rank + 1), device=device)
    dist.all_reduce(check)
    expected = args.world * (args.world + 1) / 2
    data = torch.zeros(args.mib * MIB // 4, dtype=torch.float32, device=device)
    for _ in range(2):
        dist.all_reduce(data)
    _sync(torch, device)
    t0 = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(data)
    _sync(torch, device)
    seconds = (time.perf_counter() - t0) / args.iters
    return {"correct": bool((check == expected).all().item()), "seconds_per_iter": seconds}


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    gpus = sub.add_parser("gpus")
    gpus.add_argument("--seconds", type=float, default=5.0, help="bf16 load per GPU, seconds")
    gpus.add_argument("--copy-mib", type=int, default=256, help="copy buffer, MiB")
    red = sub.add_parser("allreduce")
    red.add_argument("--rank", type=int, required=True)
    red.add_argument("--world", type=int, required=True)
    red.add_argument("--init-file", required=True)
    red.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    red.add_argument("--mib", type=int, default=256)
    red.add_argument("--iters", type=int, default=20)
    red.add_argument("--timeout", type=float, default=60.0)
    red.add_argument("--hang", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        out = gpus_mode(args) if args.mode == "gpus" else allreduce_mode(args)
    except Exception as exc:  # e.g. torch missing or NCCL init failing: still one JSON document
        out = {"mode": args.mode, "error": f"{type(exc).__name__}: {exc}"[:1000]}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
