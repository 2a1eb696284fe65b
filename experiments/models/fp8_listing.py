"""A checkpoint's tensor listing with blockwise FP8 linear weights, shared by the make-*-fp8.py
scripts: `bf16` adds a BF16 tensor, `fp8` an E4M3 weight with its F32 `weight_scale_inv` per
128x128 block (the last two dimensions; leading ones, such as stacked experts, kept), and
`write` checks the tensor count and writes the listing beside this file."""
import json
import os

BLOCK = 128


def blocks(n):
    return (n + BLOCK - 1) // BLOCK


class Listing:
    def __init__(self):
        self.t = {}

    def bf16(self, name, shape):
        self.t[name] = {"shape": shape, "dtype": "BF16"}

    def f32(self, name, shape):
        self.t[name] = {"shape": shape, "dtype": "F32"}

    def fp8(self, name, shape):
        self.t[name + ".weight"] = {"shape": shape, "dtype": "F8_E4M3"}
        self.t[name + ".weight_scale_inv"] = {
            "shape": shape[:-2] + [blocks(shape[-2]), blocks(shape[-1])], "dtype": "F32"}

    def write(self, name, count):
        assert len(self.t) == count, (name, len(self.t))
        out = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
        with open(out, "w") as f:
            json.dump(self.t, f, indent=0, sort_keys=True)
            f.write("\n")
        print("wrote %s (%d tensors)" % (out, len(self.t)))
