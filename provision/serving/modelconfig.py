"""A Hugging Face ``config.json`` -> :class:`~provision.serving.arch.ModelArchitecture`; never raises.

Keys read (Hugging Face Transformers configurations, https://huggingface.co/docs/transformers/main_classes/configuration;
Llama ``LlamaConfig``, Qwen2 ``Qwen2Config``, Mixtral ``MixtralConfig``): ``num_hidden_layers``,
``num_attention_heads``, ``num_key_value_heads`` (absent: equal to the attention heads, as LlamaConfig
defaults it), ``head_dim`` (absent: ``hidden_size // num_attention_heads``), ``hidden_size``,
``intermediate_size``, ``vocab_size``, ``max_position_embeddings``, ``tie_word_embeddings``
(LlamaConfig's default: false), ``num_local_experts``. Multimodal configurations keep these under
``text_config``. Layouts whose KV cache or parameter count this arithmetic does not describe are refused
with the reason: multi-head latent attention (``kv_lora_rank``, DeepSeek) and MoE with a separate expert
width (``moe_intermediate_size``) unless the spec gives the parameter count.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from provision.errors import first_error
from provision.serving.arch import ModelArchitecture

MAX_CONFIG_BYTES = 1 << 20
"""Largest config.json read (real ones are a few KiB)."""

_UNSUPPORTED = {
    "kv_lora_rank": "multi-head latent attention (kv_lora_rank) caches a latent vector, not K and V per head",
    "moe_intermediate_size": "its experts have their own width (moe_intermediate_size)",
}


def parse_config_json(text: str, source: str, parameters: int | None = None) -> ModelArchitecture | str:
    """The architecture in a config.json's text, or one line saying why it cannot be read.

    Args:
        text: The file's content (at most :data:`MAX_CONFIG_BYTES` characters are accepted).
        source: Where it was read (kept in the result's ``source``).
        parameters: A parameter count given in the spec; needed where the layout cannot be counted.

    Returns:
        The architecture, or a reason such as ``config.json: no num_hidden_layers``.
    """
    if len(text) > MAX_CONFIG_BYTES:
        return f"{source}: larger than {MAX_CONFIG_BYTES} bytes, not a model configuration"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return f"{source}: not JSON ({str(exc).splitlines()[0][:200]})"
    if not isinstance(data, dict):
        return f"{source}: not a JSON object"
    config = _text_config(data)
    for key, why in _UNSUPPORTED.items():
        if key in config and not (key == "moe_intermediate_size" and parameters is not None):
            return f"{source}: {why}; write serve.architecture (and parameters) in the spec instead"
    return _architecture(config, source, parameters)


def _text_config(data: dict[str, Any]) -> dict[str, Any]:
    nested = data.get("text_config")
    if "num_hidden_layers" not in data and isinstance(nested, dict):
        return nested
    return data


def _int(config: dict[str, Any], key: str) -> int | None:
    value = config.get(key)
    # bool is an int in Python; a true "num_hidden_layers" is garbage, not 1.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _architecture(config: dict[str, Any], source: str, parameters: int | None) -> ModelArchitecture | str:
    layers, heads = _int(config, "num_hidden_layers"), _int(config, "num_attention_heads")
    context, hidden = _int(config, "max_position_embeddings"), _int(config, "hidden_size")
    missing = [
        k
        for k, v in (
            ("num_hidden_layers", layers),
            ("num_attention_heads", heads),
            ("max_position_embeddings", context),
        )
        if v is None
    ]
    if missing:
        return f"{source}: no integer {', '.join(missing)}"
    assert heads is not None
    head_dim = _int(config, "head_dim") or (hidden // heads if hidden and heads > 0 else None)
    if head_dim is None:
        return f"{source}: no integer head_dim or hidden_size"
    tied = config.get("tie_word_embeddings", False)
    fields = {
        "parameters": parameters,
        "layers": layers,
        "attention_heads": heads,
        "kv_heads": _int(config, "num_key_value_heads") or heads,
        "head_dim": head_dim,
        "max_context": context,
        "hidden_size": hidden,
        "intermediate_size": _int(config, "intermediate_size"),
        "vocab_size": _int(config, "vocab_size"),
        "experts": _int(config, "num_local_experts") or 1,
        "tied_embeddings": tied if isinstance(tied, bool) else False,
        "attention_bias": config.get("model_type") == "qwen2",
        "source": source[:4096],
    }
    try:
        return ModelArchitecture.model_validate(fields)
    except ValidationError as exc:
        return f"{source}: {first_error(exc)}"
