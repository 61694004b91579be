"""``provision verify``: prove the machine works, at the speed it should, on real hardware.

Checks are pure functions of :class:`~provision.verify.runs.VerifyInputs` (detection facts, the
fabric probes, and the output of ``gpuload.py``, a standalone torch program run in the spec's
venv). Each returns :class:`~provision.verify.models.CheckResult` with the measured value, the
threshold and its named source (``catalog/data/verify.yaml``, the spec's ``verify:`` section, or a
derived formula), and a hint when it does not pass.
"""
