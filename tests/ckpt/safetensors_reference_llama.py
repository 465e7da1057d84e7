#!/usr/bin/python3
"""Independent reader for `tessera export` of a Llama-family model.

Reads model.safetensors by hand (safetensors_reference.read_safetensors) and
config.json as Hugging Face's LlamaForCausalLM would, checks the names and
shapes a LlamaForCausalLM state dict has, and builds the model in PyTorch
float64 from those names alone: nn.Linear orientation (y = x @ W.T + b,
W stored (out, in)), RMSNorm (x * rsqrt(mean(x^2) + rms_norm_eps) * w),
rotary positions in Hugging Face's rotate_half convention (dims i and
i + head_dim/2 pair, angle pos * rope_theta^(-2i/head_dim)) applied to
q_proj's and k_proj's output as stored (no permutation), grouped-query
attention (query head j reads kv head j // (heads / kv_heads)), the SwiGLU
MLP down(silu(gate(x)) * up(x)), and lm_head, or embed_tokens when
tie_word_embeddings. Compares the logits and the loss on the given tokens
with the engine's, to 1e-4 relative; exits nonzero on any mismatch.

usage: safetensors_reference_llama.py EXPORT_DIR CASE.json
  CASE.json: {"tokens": [[...T+1 ids...], ...], "loss": engine loss,
              "logits": file of the engine's float32 logits (B, T, vocab)}
"""
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from safetensors_reference import read_safetensors  # noqa: E402

TOL = 1e-4
DTYPE = torch.float64


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, theta):
    """x (B, heads, T, hd): Hugging Face Llama's rotary embedding."""
    T, hd = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=DTYPE) / hd)   # (hd/2)
    freqs = torch.arange(T, dtype=DTYPE)[:, None] * inv_freq[None, :]      # (T, hd/2)
    emb = torch.cat((freqs, freqs), dim=-1)                                 # (T, hd)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def expected_tensors(cfg):
    C, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    H, KVH, Fi = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["intermediate_size"]
    hd = C // H
    t = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
    if not cfg["tie_word_embeddings"]:
        t["lm_head.weight"] = (V, C)
    for l in range(L):
        p = f"model.layers.{l}."
        lin = {"self_attn.q_proj": (H * hd, C), "self_attn.k_proj": (KVH * hd, C),
               "self_attn.v_proj": (KVH * hd, C), "self_attn.o_proj": (C, H * hd),
               "mlp.gate_proj": (Fi, C), "mlp.up_proj": (Fi, C), "mlp.down_proj": (C, Fi)}
        for name, shape in lin.items():
            t[p + name + ".weight"] = shape
            bias = cfg["attention_bias"] if name.startswith("self_attn") else cfg["mlp_bias"]
            if bias:
                t[p + name + ".bias"] = (shape[0],)
        t[p + "input_layernorm.weight"] = (C,)
        t[p + "post_attention_layernorm.weight"] = (C,)
    return t


def forward(w, cfg, idx):
    C, H, KVH = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    hd = C // H
    B, T = idx.shape

    def linear(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    x = w["model.embed_tokens.weight"][idx]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(h, p + "self_attn.q_proj").view(B, T, H, hd).transpose(1, 2)
        k = linear(h, p + "self_attn.k_proj").view(B, T, KVH, hd).transpose(1, 2)
        v = linear(h, p + "self_attn.v_proj").view(B, T, KVH, hd).transpose(1, 2)
        q, k = apply_rope(q, theta), apply_rope(k, theta)
        k = k.repeat_interleave(H // KVH, dim=1)  # (B, H, T, hd): head j reads kv head j // (H/KVH)
        v = v.repeat_interleave(H // KVH, dim=1)
        att = (q @ k.transpose(-1, -2) / math.sqrt(hd)).masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * hd)
        x = x + linear(y, p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + linear(F.silu(linear(h, p + "mlp.gate_proj")) * linear(h, p + "mlp.up_proj"),
                       p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def main():
    out, case = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    cfg = json.loads((out / "config.json").read_text())
    for k, v in {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
                 "rope_scaling": None, "torch_dtype": "float32"}.items():
        assert cfg[k] == v, (k, cfg[k])
    assert cfg["head_dim"] == cfg["hidden_size"] // cfg["num_attention_heads"], cfg["head_dim"]
    w, meta = read_safetensors(out / "model.safetensors")
    assert meta.get("format") == "pt", meta
    expected = expected_tensors(cfg)
    assert set(w) == set(expected), sorted(set(w) ^ set(expected))
    for k, s in expected.items():
        assert tuple(w[k].shape) == s, (k, tuple(w[k].shape), s)

    tokens = torch.tensor(case["tokens"], dtype=torch.long)
    idx, tgt = tokens[:, :-1], tokens[:, 1:]
    B, T = idx.shape
    V = cfg["vocab_size"]
    logits = forward(w, cfg, idx)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1)).item()
    ours = torch.from_numpy(np.fromfile(case["logits"], dtype="<f4").astype(np.float64)).view(B, T, V)
    logit_err = (ours - logits).abs().max().item() / logits.abs().max().item()
    loss_err = abs(loss - case["loss"]) / abs(loss)
    ok = logit_err <= TOL and loss_err <= TOL
    print(f"safetensors_reference_llama: {'ok' if ok else 'FAIL'}: logits relative error "
          f"{logit_err:.2e}, loss torch {loss:.8f} engine {case['loss']:.8f} (relative {loss_err:.2e}); "
          f"{len(w)} tensors, {cfg['num_key_value_heads']} kv heads of {cfg['num_attention_heads']}, "
          f"{'tied' if cfg['tie_word_embeddings'] else 'untied'}, biases {cfg['attention_bias']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
