#!/usr/bin/python3
"""Write experiments/models/deepseek-v3-fp8.json: the tensor listing of DeepSeek-V3's Hugging Face
checkpoint as NCCL M2N's reshard_model_bench moves it (docs/measurements.md, `m2n-readme`): FP8
E4M3 weights of every quantized linear layer with their F32 weight_scale_inv per 128x128 block,
BF16 norms, embedding, router and lm_head, the router's F32 e_score_correction_bias; the routed
experts of a layer stacked per projection ([E, out, in], one transfer each, as the bench stacks
them); layers 0-60 (the MTP layer 61 left out: the bench's count, not verified). 1,687 tensors.
Shapes from the config (deepseek-ai/DeepSeek-V3 config.json, model/configs/deepseek-v3.json)."""
import json
import os

H, I, MI, E, V = 7168, 18432, 2048, 256, 129280
QA, KVA, HEADS, NOPE, ROPE, VD = 1536, 512, 128, 128, 64, 128
LAYERS, DENSE, BLOCK = 61, 3, 128


def blocks(n):
    return (n + BLOCK - 1) // BLOCK


def main():
    t = {}

    def bf16(name, shape):
        t[name] = {"shape": shape, "dtype": "BF16"}

    def fp8(name, shape):
        t[name + ".weight"] = {"shape": shape, "dtype": "F8_E4M3"}
        sc = shape[:-2] + [blocks(shape[-2]), blocks(shape[-1])]
        t[name + ".weight_scale_inv"] = {"shape": sc, "dtype": "F32"}

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
        t[p + "mlp.gate.e_score_correction_bias"] = {"shape": [E], "dtype": "F32"}
        fp8(p + "mlp.shared_experts.gate_proj", [MI, H])
        fp8(p + "mlp.shared_experts.up_proj", [MI, H])
        fp8(p + "mlp.shared_experts.down_proj", [H, MI])
        fp8(p + "mlp.experts.gate_proj", [E, MI, H])
        fp8(p + "mlp.experts.up_proj", [E, MI, H])
        fp8(p + "mlp.experts.down_proj", [E, H, MI])
    bf16("model.norm.weight", [H])
    bf16("lm_head.weight", [V, H])
    assert len(t) == 1687, len(t)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepseek-v3-fp8.json")
    with open(out, "w") as f:
        json.dump(t, f, indent=0, sort_keys=True)
        f.write("\n")
    print("wrote %s (%d tensors)" % (out, len(t)))


if __name__ == "__main__":
    main()
