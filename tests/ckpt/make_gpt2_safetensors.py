#!/usr/bin/python3
"""Writes a Hugging Face GPT-2 checkpoint (model.safetensors + config.json),
independently of tessera, for the import and fine-tuning tests and the
README's fine-tuning demo. numpy only; the safetensors layout by hand
(8-byte little-endian header length, JSON header, raw little-endian data).

The weights follow GPT-2's initialisation (normal(0, 0.02), residual
projections 0.02 / sqrt(2 n_layer), zero biases, unit LayerNorm gains), in
the state-dict names and Conv1D (in, out) orientation of GPT2LMHeadModel.
Options make the files the importer must refuse or accept:
  --extra-layer         also h.<n_layer>.* tensors (a file of a deeper model)
  --untied-head         an lm_head.weight that differs from wte
  --tied-head-copy      an lm_head.weight equal to wte (a tied head saved twice)
  --mask-buffers        h.N.attn.bias / attn.masked_bias (older transformers)
  --zero-head           wte all zeros: every logit 0, the loss exactly ln(vocab)
  --no-prefix           names without "transformer." (the hub's gpt2 file)

usage: make_gpt2_safetensors.py OUT_DIR [--layers 2 --hidden 64 --heads 4
       --vocab 4096 --positions 64 --seed 0 ...]
"""
import argparse
import json
import math
import struct
from pathlib import Path

import numpy as np


def gpt2_tensors(a):
    rng = np.random.default_rng(a.seed)
    C, L, V, P = a.hidden, a.layers, a.vocab, a.positions
    normal = lambda *shape, std=0.02: rng.normal(0.0, std, shape).astype(np.float32)
    zeros = lambda *shape: np.zeros(shape, np.float32)
    ones = lambda *shape: np.ones(shape, np.float32)
    t = {"wte.weight": zeros(V, C) if a.zero_head else normal(V, C), "wpe.weight": normal(P, C, std=0.01)}
    proj_std = 0.02 / math.sqrt(2 * L)
    for l in range(L + (1 if a.extra_layer else 0)):
        p = f"h.{l}."
        t.update({p + "ln_1.weight": ones(C), p + "ln_1.bias": zeros(C),
                  p + "attn.c_attn.weight": normal(C, 3 * C), p + "attn.c_attn.bias": zeros(3 * C),
                  p + "attn.c_proj.weight": normal(C, C, std=proj_std), p + "attn.c_proj.bias": zeros(C),
                  p + "ln_2.weight": ones(C), p + "ln_2.bias": zeros(C),
                  p + "mlp.c_fc.weight": normal(C, 4 * C), p + "mlp.c_fc.bias": zeros(4 * C),
                  p + "mlp.c_proj.weight": normal(4 * C, C, std=proj_std), p + "mlp.c_proj.bias": zeros(C)})
        if a.mask_buffers:
            t[p + "attn.bias"] = np.tril(ones(P, P)).reshape(1, 1, P, P)
            t[p + "attn.masked_bias"] = np.array(-1e4, np.float32)
    t.update({"ln_f.weight": ones(C), "ln_f.bias": zeros(C)})
    prefix = "" if a.no_prefix else "transformer."
    out = {prefix + k: v for k, v in t.items()}
    if a.untied_head:
        out["lm_head.weight"] = normal(V, C)
    elif a.tied_head_copy:
        out["lm_head.weight"] = t["wte.weight"].copy()
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, x in tensors.items():
        raw = np.ascontiguousarray(x, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)  # the format pads the header to 8 bytes
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    for flag in ("extra-layer", "untied-head", "tied-head-copy", "mask-buffers", "zero-head", "no-prefix"):
        ap.add_argument("--" + flag, action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", gpt2_tensors(a))
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": a.layers,
              "n_embd": a.hidden, "n_head": a.heads, "n_positions": a.positions, "n_ctx": a.positions,
              "n_inner": None, "vocab_size": a.vocab, "activation_function": "gelu_new",
              "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
              "tie_word_embeddings": True}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"wrote {out}/model.safetensors and config.json ({a.layers} layers, hidden {a.hidden}, "
          f"{a.heads} heads, vocabulary {a.vocab}, {a.positions} positions)")


if __name__ == "__main__":
    main()
