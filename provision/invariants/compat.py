"""CUDA forward compatibility only where NVIDIA supports it.

The cuda-compat package puts a newer libcuda under ``/usr/local/cuda-X.Y/compat``; when the
loader picks it (ld.so.conf.d), CUDA runs the newer user-mode driver on the older kernel module.
NVIDIA supports that on data center GPUs only; elsewhere CUDA fails with error 804
(``cudaErrorCompatNotSupportedOnDevice``). Sources: NVIDIA CUDA Compatibility, "Forward
Compatibility" (https://docs.nvidia.com/deploy/cuda-compatibility/); the catalog's per-GPU
``forward_compat`` row (``provision/catalog/data/gpus.yaml``).
"""

from __future__ import annotations

from provision.catalog import Catalog
from provision.detect.facts import Facts, Unknown
from provision.invariants.base import Invariant, Verdict
from provision.spec.models import Spec


class ForwardCompatSupported(Invariant):
    """A cuda-compat libcuda is in use only on a GPU whose model supports forward compatibility."""

    id = "forward-compat-supported"
    title = "forward compatibility only where supported"
    layer = "driver"
    source = "NVIDIA CUDA Compatibility, Forward Compatibility (https://docs.nvidia.com/deploy/cuda-compatibility/)"
    reads = ("ld_cache",)
    severity = "warning"

    def judge(self, spec: Spec, facts: Facts, catalog: Catalog) -> Verdict:
        cache = facts.ld_cache
        if isinstance(cache, Unknown):
            return self.unknown(cache)
        libcuda = cache.first("libcuda.so.1")
        if libcuda is None:
            return self.not_applicable("no libcuda.so.1 in the loader cache")
        if "/compat/" not in libcuda:
            return self.holds(f"libcuda.so.1 from {libcuda} (the driver's)")
        model = catalog.gpu(spec.gpus.model)
        if model is None:
            return self.unknown(f"{spec.gpus.model} is not in the catalog")
        support = model.forward_compat
        if support.supported is None:
            return self.unknown(
                f"forward compatibility on {model.name} is not in the catalog ({support.note})"
            )
        if support.supported:
            return self.holds(
                f"libcuda.so.1 from {libcuda}: forward compatibility on {model.name}, supported"
            )
        return self.violated(
            f"libcuda.so.1 from {libcuda} on {model.name}",
            "the cuda-compat libcuda is in use; NVIDIA supports forward compatibility on data center GPUs "
            f"only ({model.name}: {support.note or 'not supported'}); CUDA fails with error 804",
            "remove the compat directory from /etc/ld.so.conf.d and run ldconfig; raise the driver to the "
            "CUDA release's minimum instead",
        )
