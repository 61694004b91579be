"""A decoder-only transformer's figures, as the memory-fit arithmetic reads them.

Sources: Hugging Face Transformers configuration keys (``num_hidden_layers``, ``num_attention_heads``,
``num_key_value_heads``, ``head_dim``, ``hidden_size``, ``intermediate_size``, ``vocab_size``,
``max_position_embeddings``, ``tie_word_embeddings``, ``num_local_experts``;
https://huggingface.co/docs/transformers/main_classes/configuration) and the Llama/Qwen2/Mixtral
modelling code the parameter count follows (q/k/v/o projections, a gated MLP of three matrices per
expert, a router per MoE layer, two RMSNorms per layer and one final).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from provision.models import Frozen


class ModelArchitecture(Frozen):
    """The figures of one model (``serve.architecture``, or read from its ``config.json``).

    Attributes:
        parameters: Total parameter count; unset, :meth:`parameter_count` derives it from the
            dimensions below (needs ``hidden_size``, ``intermediate_size`` and ``vocab_size``).
        layers: Transformer layers (``num_hidden_layers``).
        attention_heads: Query heads per layer (``num_attention_heads``).
        kv_heads: Key/value heads per layer (``num_key_value_heads``; GQA/MQA have fewer than query heads).
        head_dim: Elements per head (``head_dim``, else ``hidden_size / num_attention_heads``).
        max_context: Longest context the model was trained for, tokens (``max_position_embeddings``).
        hidden_size: Model width, elements.
        intermediate_size: MLP width per expert, elements.
        vocab_size: Tokens in the vocabulary.
        experts: MLP experts per layer (1 for a dense model; ``num_local_experts``).
        tied_embeddings: The LM head shares the token embedding's weights.
        attention_bias: q/k/v projections have biases (Qwen2).
        source: Where the figures come from (``spec`` or the config.json path).
    """

    parameters: int | None = Field(
        None,
        ge=1,
        le=10**15,
        description="Total parameters (at most 10^15, ~500 times the largest published models); unset: "
        "derived from the dimensions.",
        examples=[8030261248],
    )
    layers: int = Field(
        ge=1, le=100_000, description="Transformer layers (num_hidden_layers).", examples=[32]
    )
    attention_heads: int = Field(
        ge=1, le=100_000, description="Query heads per layer (num_attention_heads).", examples=[32]
    )
    kv_heads: int = Field(
        ge=1, le=100_000, description="Key/value heads per layer (num_key_value_heads).", examples=[8]
    )
    head_dim: int = Field(ge=1, le=100_000, description="Elements per attention head.", examples=[128])
    max_context: int = Field(
        ge=1,
        le=100_000_000,
        description="Trained context length (max_position_embeddings).",
        examples=[131072],
    )
    hidden_size: int | None = Field(None, ge=1, le=1_000_000, description="Model width.", examples=[4096])
    intermediate_size: int | None = Field(
        None, ge=1, le=10_000_000, description="MLP width per expert.", examples=[14336]
    )
    vocab_size: int | None = Field(
        None, ge=1, le=100_000_000, description="Vocabulary size.", examples=[128256]
    )
    experts: int = Field(
        1, ge=1, le=100_000, description="MLP experts per layer (num_local_experts); 1: dense.", examples=[8]
    )
    tied_embeddings: bool = Field(
        False, description="The LM head shares the embedding's weights.", examples=[False]
    )
    attention_bias: bool = Field(
        False, description="q/k/v projections carry biases (Qwen2).", examples=[False]
    )
    source: str = Field(
        "spec", max_length=4096, description="Where the figures were read.", examples=["spec"]
    )

    @model_validator(mode="after")
    def _consistent(self) -> ModelArchitecture:
        if self.attention_heads % self.kv_heads:
            raise ValueError(
                f"attention_heads {self.attention_heads} is not a multiple of kv_heads {self.kv_heads}"
            )
        if self.parameters is None and self.derived_parameters() is None:
            raise ValueError("give parameters, or hidden_size, intermediate_size and vocab_size to derive it")
        return self

    def derived_parameters(self) -> int | None:
        """Parameters from the dimensions (Llama/Qwen2/Mistral/Mixtral layout), None without them.

        Per layer: q and o (hidden x heads x head_dim each), k and v (hidden x kv_heads x head_dim each),
        q/k/v biases when ``attention_bias``, three MLP matrices (hidden x intermediate) per expert, a
        router (hidden x experts) when ``experts > 1``, two norms (hidden); plus the embedding
        (vocab x hidden), the LM head unless tied, and the final norm.
        """
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        if h is None or i is None or v is None:
            return None
        q, kv = self.attention_heads * self.head_dim, self.kv_heads * self.head_dim
        attention = 2 * h * q + 2 * h * kv + ((q + 2 * kv) if self.attention_bias else 0)
        mlp = self.experts * 3 * h * i + (h * self.experts if self.experts > 1 else 0)
        per_layer = attention + mlp + 2 * h
        return self.layers * per_layer + h + self.embedding_parameters()

    def embedding_parameters(self) -> int:
        """Token embedding plus LM head parameters (0 when the vocabulary or width is unknown)."""
        if self.hidden_size is None or self.vocab_size is None:
            return 0
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    def parameter_count(self) -> int:
        """``parameters`` when given, else the derived count (the validator ensures one exists)."""
        count = self.parameters if self.parameters is not None else self.derived_parameters()
        assert count is not None
        return count
