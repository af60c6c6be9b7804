"""The architectures llmkit runs, one entry each (:class:`Architecture`): the table the HF
loader, the GGUF reader and the demo builder all read, and its lookups. Torch-free."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from llmkit.model.architecture import Architecture, Kind
from llmkit.model.gguf import families

_MOE_KEYS = MappingProxyType(
    {
        "num_experts": "expert_count",
        "num_experts_per_tok": "expert_used_count",
        "moe_intermediate_size": "expert_feed_forward_length",
    }
)

# Gemma's norms around each block, as llama.cpp names them (its ffn_norm is the norm before
# the MLP, Llama's post_attention_layernorm).
_GEMMA_NORMS = MappingProxyType(
    {
        "post_attention_norm": "post_attention_layernorm",
        "ffn_norm": "pre_feedforward_layernorm",
        "post_ffw_norm": "post_feedforward_layernorm",
    }
)

# (The converter shifts every norm by one but the linear attention's gated one.)
_QWEN35_GGUF: dict[str, Any] = dict(
    gguf_tensors=families.QWEN35_TENSORS,
    gguf_config=families.qwen35,
    gguf_norm_shift=1.0,
    gguf_unshifted=("linear_attn.norm.weight",),
)
# Three linear-attention layers, then a full-attention one; two value heads a key head, of
# another size than the keys', so that every head mapping is observable.
_QWEN35_DEMO = MappingProxyType(
    {
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 4,
    }
)

ARCHITECTURES: tuple[Architecture, ...] = (
    Architecture(
        "LlamaForCausalLM", "llama", "llama", "LlamaConfig", gguf="llama", gguf_permutes_qk=True
    ),
    Architecture("MistralForCausalLM", "mistral", "llama", "MistralConfig"),
    Architecture(
        "Qwen2ForCausalLM",
        "qwen2",
        "llama",
        "Qwen2Config",
        gguf="qwen2",
        config=MappingProxyType({"use_sliding_window": False}),
    ),
    Architecture("Qwen3ForCausalLM", "qwen3", "llama", "Qwen3Config", gguf="qwen3"),
    Architecture(
        "Qwen3MoeForCausalLM",
        "qwen3_moe",
        "qwen3_moe",
        "Qwen3MoeConfig",
        gguf="qwen3moe",
        # llama.cpp's qwen3moe always renormalizes the chosen experts' weights.
        config=MappingProxyType({"norm_topk_prob": True}),
        gguf_keys=_MOE_KEYS,
        demo=MappingProxyType(
            {
                "num_experts": 8,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 32,
                "mlp_only_layers": [1],  # a dense layer beside the sparse ones
            }
        ),
    ),
    Architecture(
        "GptOssForCausalLM",
        "gpt_oss",
        "gpt_oss",
        "GptOssConfig",
        gguf="gpt-oss",
        gguf_keys=MappingProxyType(
            {
                "num_local_experts": "expert_count",
                "num_experts_per_tok": "expert_used_count",
                "sliding_window": "attention.sliding_window",
            }
        ),
        # HF's post-attention norm is llama.cpp's; its gpt-oss files have no ffn_norm.
        gguf_tensors=MappingProxyType(
            {"post_attention_norm": "post_attention_layernorm", "attn_sinks": "self_attn.sinks"}
        ),
        # gpt-oss's YaRN keeps the correction range unrounded; the files do not say so.
        gguf_rope=MappingProxyType({"truncate": False}),
        demo=MappingProxyType(
            {"num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": 16}
        ),
    ),
    Architecture(
        "Gemma3ForCausalLM",
        "gemma3_text",
        "gemma3",
        "Gemma3TextConfig",
        gguf="gemma3",
        gguf_tensors=_GEMMA_NORMS,
        gguf_config=families.gemma3,
        gguf_norm_shift=1.0,
        demo=MappingProxyType(
            {
                # A global layer after five local ones: llama.cpp's pattern for Gemma 3,
                # which its converter does not write.
                "sliding_window": 16,
                "query_pre_attn_scalar": 16,  # the head size, as llama.cpp scales queries
                "final_logit_softcapping": 30.0,
                "rope_parameters": {
                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                    "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                },
            }
        ),
    ),
    Architecture(
        "Gemma4ForCausalLM",
        "gemma4_text",
        "gemma4",
        "Gemma4TextConfig",
        gguf="gemma4",
        gguf_tensors=MappingProxyType(
            {
                **_GEMMA_NORMS,
                "pre_ffw_norm_2": "pre_feedforward_layernorm_2",
                "post_ffw_norm_1": "post_feedforward_layernorm_1",
                "post_ffw_norm_2": "post_feedforward_layernorm_2",
                "ffn_gate_inp": "router.proj",  # its .scale is the router's scale
                "ffn_gate_up_exps": "experts.gate_up_proj",
                "ffn_down_exps": "experts.down_proj",  # its .scale: each expert's scale
                "layer_output_scale": "layer_scalar",
                "inp_gate": "per_layer_input_gate",
                "proj": "per_layer_projection",
                "post_norm": "post_per_layer_input_norm",
            }
        ),
        gguf_config=families.gemma4,
        gguf_reads=("rope_freqs.weight",),
        demo=MappingProxyType(
            {
                # Every feature of the family's text models in one: local layers of head
                # size 16, global ones of 32 with one KV head, their values the keys'
                # projection; the last two layers sharing the KV caches of the last local
                # and global ones before them (the global layer's MLP twice as wide); a
                # mixture of experts beside each MLP; per-layer inputs.
                "layer_types": ["sliding_attention"] * 2
                + ["full_attention"]
                + ["sliding_attention"] * 2
                + ["full_attention"],
                "sliding_window": 16,
                "global_head_dim": 32,
                "num_global_key_value_heads": 1,
                "attention_k_eq_v": True,
                "num_kv_shared_layers": 2,
                "use_double_wide_mlp": True,
                "enable_moe_block": True,
                "num_experts": 4,
                "top_k_experts": 2,
                "moe_intermediate_size": 32,
                "vocab_size_per_layer_input": 4096,  # more rows than the tokenizer's ids
                "hidden_size_per_layer_input": 8,
                "final_logit_softcapping": 30.0,
                "rope_parameters": {
                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                    "full_attention": {
                        "rope_type": "proportional",
                        "partial_rotary_factor": 0.25,
                        "rope_theta": 1e6,
                    },
                },
            }
        ),
    ),
    Architecture(
        "Qwen3_5ForCausalLM",
        "qwen3_5_text",
        "qwen3_5",
        "Qwen3_5TextConfig",
        gguf="qwen35",
        **_QWEN35_GGUF,
        demo=_QWEN35_DEMO,
    ),
    Architecture(
        "Qwen3_5MoeForCausalLM",
        "qwen3_5_moe_text",
        "qwen3_5",
        "Qwen3_5MoeTextConfig",
        gguf="qwen35moe",
        gguf_keys=MappingProxyType(
            {**_MOE_KEYS, "shared_expert_intermediate_size": "expert_shared_feed_forward_length"}
        ),
        **_QWEN35_GGUF,
        demo=MappingProxyType(
            {
                **_QWEN35_DEMO,
                "num_experts": 8,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 32,
                "shared_expert_intermediate_size": 64,
            }
        ),
    ),
    # Qwen3.5/3.6 as published (a vision tower beside the text model): the text model.
    Architecture(
        "Qwen3_5ForConditionalGeneration",
        "qwen3_5",
        "qwen3_5",
        "Qwen3_5Config",
        kind="vision-language",
    ),
    Architecture(
        "Qwen3_5MoeForConditionalGeneration",
        "qwen3_5_moe",
        "qwen3_5",
        "Qwen3_5MoeConfig",
        kind="vision-language",
    ),
    Architecture("BertModel", "bert", "bert", "BertConfig", kind="encoder"),
    Architecture("BertForMaskedLM", "bert", "bert", "BertConfig", kind="encoder"),
    Architecture(
        "LlavaForConditionalGeneration",
        "llava",
        "llava",
        "LlavaConfig",
        kind="vision-language",
    ),
)


def by_name(name: str) -> Architecture | None:
    """The entry for an HF ``architectures`` name."""
    return next((a for a in ARCHITECTURES if a.name == name), None)


def by_model_type(model_type: str, kind: Kind | None = None) -> Architecture | None:
    """The first entry (the table's order) for an HF ``model_type``, of ``kind`` if given."""
    return next(
        (
            a
            for a in ARCHITECTURES
            if a.model_type == model_type and (kind is None or a.kind == kind)
        ),
        None,
    )


def by_gguf(arch: str) -> Architecture | None:
    """The entry for a GGUF file's ``general.architecture``."""
    return next((a for a in ARCHITECTURES if a.gguf == arch), None)


def names(kind: Kind | None = None) -> list[str]:
    """Every entry's ``name`` (of ``kind`` if given), sorted, for error messages."""
    return sorted(a.name for a in ARCHITECTURES if kind is None or a.kind == kind)


def model_types(kind: Kind) -> list[str]:
    """The ``model_type`` of every entry of ``kind``, in the table's order, once each."""
    return list(dict.fromkeys(a.model_type for a in ARCHITECTURES if a.kind == kind))


def gguf_names() -> list[str]:
    """Every GGUF ``general.architecture`` llmkit reads, sorted."""
    return sorted(a.gguf for a in ARCHITECTURES if a.gguf)
