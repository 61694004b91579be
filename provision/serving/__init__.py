"""Serving a model with vLLM: the model's architecture, the memory-fit arithmetic, the server's argv.

Everything here is pure and never imports the spec package (the spec imports
:mod:`provision.serving.arch` for its ``serve.architecture`` field):

- :mod:`~provision.serving.arch`: :class:`~provision.serving.arch.ModelArchitecture`, the figures the
  arithmetic reads, and the parameter count derived from them.
- :mod:`~provision.serving.modelconfig`: a Hugging Face ``config.json`` -> architecture parser that never
  raises.
- :mod:`~provision.serving.data`: the catalog file ``serving.yaml`` (bytes per parameter, KV cache
  element sizes, the runtime allowance, vLLM's torch pins), each row with its source.
- :mod:`~provision.serving.fit`: the memory-fit planner and tensor-parallel rules.
- :mod:`~provision.serving.unit`: the systemd unit of the OpenAI-compatible server, rendered from argv data.
"""
