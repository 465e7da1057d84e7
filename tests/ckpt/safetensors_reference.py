#!/usr/bin/python3
"""Independent reader for `tessera export --format safetensors`.

Parses model.safetensors by hand (8-byte little-endian header length, JSON
header, raw little-endian tensors), checks config.json, builds GPT-2 in
PyTorch float64 from the Hugging Face names with Conv1D orientation
(y = x @ W + b, W stored (in, out)) and the tied LM head, and compares the
loss on the given tokens with the engine's. Exits nonzero on any mismatch.

usage: safetensors_reference.py EXPORT_DIR CASE.json
  CASE.json: {"tokens": [[...T+1 ids...], ...], "loss": engine loss}
"""
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-5


def read_safetensors(path):
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    end = 0
    for name, h in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        assert h["dtype"] == "F32", (name, h["dtype"])
        b, e = h["data_offsets"]
        assert b == end, f"{name}: gap or overlap at byte {b}"
        end = e
        arr = np.frombuffer(data[b:e], dtype="<f4").reshape(h["shape"])
        tensors[name] = torch.from_numpy(arr.astype(np.float64))
    assert end == len(data), "trailing bytes after the last tensor"
    return tensors, meta


def main():
    out, case = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    cfg = json.loads((out / "config.json").read_text())
    for k, v in {"model_type": "gpt2", "activation_function": "gelu_new",
                 "layer_norm_epsilon": 1e-5, "architectures": ["GPT2LMHeadModel"]}.items():
        assert cfg[k] == v, (k, cfg[k])
    L, C, H, V, P = cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["vocab_size"], cfg["n_positions"]
    assert cfg["n_ctx"] == P
    w, meta = read_safetensors(out / "model.safetensors")
    assert meta.get("format") == "pt", meta
    assert "lm_head.weight" not in w, "the head is tied: it must not be written"
    expected = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (P, C),
                "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)}
    inner = cfg["n_inner"] or 4 * C
    for l in range(L):
        p = f"transformer.h.{l}."
        expected.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
                         p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
                         p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
                         p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                         p + "mlp.c_fc.weight": (C, inner), p + "mlp.c_fc.bias": (inner,),
                         p + "mlp.c_proj.weight": (inner, C), p + "mlp.c_proj.bias": (C,)})
    assert set(w) == set(expected), set(w) ^ set(expected)
    for k, s in expected.items():
        assert tuple(w[k].shape) == s, (k, tuple(w[k].shape), s)

    tokens = torch.tensor(case["tokens"], dtype=torch.long)
    idx, tgt = tokens[:, :-1], tokens[:, 1:]
    B, T = idx.shape
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    heads = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
    for l in range(L):
        q = lambda s: w[f"transformer.h.{l}.{s}"]
        h = F.layer_norm(x, (C,), q("ln_1.weight"), q("ln_1.bias"), 1e-5)
        qq, kk, vv = (h @ q("attn.c_attn.weight") + q("attn.c_attn.bias")).split(C, dim=-1)
        att = heads(qq) @ heads(kk).transpose(-1, -2) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ heads(vv)).transpose(1, 2).reshape(B, T, C)
        x = x + y @ q("attn.c_proj.weight") + q("attn.c_proj.bias")
        h = F.layer_norm(x, (C,), q("ln_2.weight"), q("ln_2.bias"), 1e-5)
        h = F.gelu(h @ q("mlp.c_fc.weight") + q("mlp.c_fc.bias"), approximate="tanh")
        x = x + h @ q("mlp.c_proj.weight") + q("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
    logits = x @ w["transformer.wte.weight"].T
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1)).item()
    rel = abs(loss - case["loss"]) / abs(loss)
    print(f"safetensors_reference: torch loss {loss:.8f}, engine {case['loss']:.8f}, "
          f"relative difference {rel:.2e} ({len(w)} tensors)")
    return 0 if rel <= TOL else 1


if __name__ == "__main__":
    sys.exit(main())
