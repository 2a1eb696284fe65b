#!/usr/bin/python3
"""Write experiments/models/deepseek-v3-fp8.json: the tensor listing of DeepSeek-V3's Hugging Face
checkpoint as NCCL M2N's reshard_model_bench moves it (docs/measurements.md, `m2n-readme`): FP8
E4M3 weights of every quantized linear layer with their F32 weight_scale_inv per 128x128 block,
BF16 norms, embedding, router and lm_head, the router's F32 e_score_correction_bias; the routed
experts of a layer stacked per projection ([E, out, in], one transfer each, as the bench stacks
them); layers 0-60 (the MTP layer 61 left out: the bench's count, not verified). 1,687 tensors.
Shapes from the config (deepseek-ai/DeepSeek-V3 config.json, model/configs/deepseek-v3.json)."""
from fp8_listing import Listing

H, I, MI, E, V = 7168, 18432, 2048, 256, 129280
QA, KVA, HEADS, NOPE, ROPE, VD = 1536, 512, 128, 128, 64, 128
LAYERS, DENSE = 61, 3


def main():
    x = Listing()
    bf16, fp8 = x.bf16, x.fp8
    bf16("model.embed_tokens.weight", [V, H])
    for L in range(LAYERS):
        p = "model.layers.%d." % L
        bf16(p + "input_layernorm.weight", [H])
        bf16(p + "post_attention_layernorm.weight", [H])
        fp8(p + "self_attn.q_a_proj", [QA, H])
        bf16(p + "self_attn.q_a_layernorm.weight", [QA])
        fp8(p + "self_attn.q_b_proj", [HEADS * (NOPE + ROPE), QA])
        fp8(p + "self_attn.kv_a_proj_with_mqa", [KVA + ROPE, H])
        bf16(p + "self_attn.kv_a_layernorm.weight", [KVA])
        fp8(p + "self_attn.kv_b_proj", [HEADS * (NOPE + VD), KVA])
        fp8(p + "self_attn.o_proj", [H, HEADS * VD])
        if L < DENSE:
            fp8(p + "mlp.gate_proj", [I, H])
            fp8(p + "mlp.up_proj", [I, H])
            fp8(p + "mlp.down_proj", [H, I])
            continue
        bf16(p + "mlp.gate.weight", [E, H])
        x.f32(p + "mlp.gate.e_score_correction_bias", [E])
        fp8(p + "mlp.shared_experts.gate_proj", [MI, H])
        fp8(p + "mlp.shared_experts.up_proj", [MI, H])
        fp8(p + "mlp.shared_experts.down_proj", [H, MI])
        fp8(p + "mlp.experts.gate_proj", [E, MI, H])
        fp8(p + "mlp.experts.up_proj", [E, MI, H])
        fp8(p + "mlp.experts.down_proj", [E, H, MI])
    bf16("model.norm.weight", [H])
    bf16("lm_head.weight", [V, H])
    x.write("deepseek-v3-fp8.json", 1687)


if __name__ == "__main__":
    main()
