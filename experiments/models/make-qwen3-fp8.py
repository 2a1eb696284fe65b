#!/usr/bin/python3
"""Write experiments/models/qwen3-4b-fp8.json and qwen3-30b-a3b-fp8.json: the tensor listings of
Qwen3-4B and Qwen3-30B-A3B as NeMo RL's FP8 -> FP8 refit moves them (docs/measurements.md, rows
v33 and v36-v38): the trainer keeps Transformer Engine blockwise FP8 parameters
(`fp8_cfg.fp8_param=true`, `fp8_recipe=blockwise`) and Megatron-Bridge's `build_export_fp8_tasks`
exports every FP8 weight as its E4M3 data plus an F32 `_scale_inv` sibling per 128x128 block
(NVIDIA-NeMo/RL bf68d87 and e40aa046e `megatron_policy_worker.py` `_build_refit_conversion_tasks`).
FP8: the linear layers Transformer Engine holds (q, k, v, o; dense gate / up / down; the routed
experts, stacked per projection [E, out, in] as a listing stacks them). BF16: embedding, norms,
the MoE router (a plain parameter in Megatron, `quant_config=None` in vLLM) and lm_head.
Shapes from the configs: experiments/models/qwen3-4b.json (Qwen/Qwen3-4B) and
model/configs/qwen3-30b-a3b.json (Qwen/Qwen3-30B-A3B). 650 and 915 tensors."""
from fp8_listing import Listing

VOCAB = 151936


def listing(layers, hidden, heads, kv_heads, head_dim, ffn=0, experts=0, moe_ffn=0, tied=True):
    x = Listing()
    bf16, fp8 = x.bf16, x.fp8

    bf16("model.embed_tokens.weight", [VOCAB, hidden])
    for L in range(layers):
        p = "model.layers.%d." % L
        bf16(p + "input_layernorm.weight", [hidden])
        bf16(p + "post_attention_layernorm.weight", [hidden])
        bf16(p + "self_attn.q_norm.weight", [head_dim])
        bf16(p + "self_attn.k_norm.weight", [head_dim])
        fp8(p + "self_attn.q_proj", [heads * head_dim, hidden])
        fp8(p + "self_attn.k_proj", [kv_heads * head_dim, hidden])
        fp8(p + "self_attn.v_proj", [kv_heads * head_dim, hidden])
        fp8(p + "self_attn.o_proj", [hidden, heads * head_dim])
        if experts:
            bf16(p + "mlp.gate.weight", [experts, hidden])
            fp8(p + "mlp.experts.gate_proj", [experts, moe_ffn, hidden])
            fp8(p + "mlp.experts.up_proj", [experts, moe_ffn, hidden])
            fp8(p + "mlp.experts.down_proj", [experts, hidden, moe_ffn])
        else:
            fp8(p + "mlp.gate_proj", [ffn, hidden])
            fp8(p + "mlp.up_proj", [ffn, hidden])
            fp8(p + "mlp.down_proj", [hidden, ffn])
    bf16("model.norm.weight", [hidden])
    if not tied:
        bf16("lm_head.weight", [VOCAB, hidden])
    return x


def main():
    listing(36, 2560, 32, 8, 128, ffn=9728).write("qwen3-4b-fp8.json", 650)
    listing(48, 2048, 32, 4, 128, experts=128, moe_ffn=768, tied=False).write(
        "qwen3-30b-a3b-fp8.json", 915)


if __name__ == "__main__":
    main()
