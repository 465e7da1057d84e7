#!/usr/bin/python3
"""Writes a Hugging Face Llama checkpoint (model.safetensors + config.json),
independently of tessera, for the Llama import and fine-tuning test
(tests/scripts/test_finetune_llama.sh). numpy only; the file is written by
make_gpt2_safetensors.write_safetensors.

The weights follow Llama's initialisation (normal(0, 0.02), unit RMSNorm
gains, zero biases), in LlamaForCausalLM's state-dict names and nn.Linear's
(out, in) orientation. Options:
  --kv-heads N          grouped-query attention (default: as many as --heads)
  --untied              an lm_head.weight of its own (tie_word_embeddings false)
  --bias                attention_bias and mlp_bias: every projection has a bias
  --zero-head           embed_tokens (and lm_head) all zeros: every logit 0,
                        the loss exactly ln(vocab)
  --inv-freq            each layer's self_attn.rotary_emb.inv_freq buffer
                        (older transformers saved it)
  --rope-scaling TYPE   config.json's rope_scaling {"rope_type": TYPE, "factor": 8}
  --hidden-act NAME     config.json's hidden_act (default silu)

usage: make_llama_safetensors.py OUT_DIR [--layers 2 --hidden 64 --heads 4
       --intermediate 128 --vocab 4096 --positions 64 --seed 0 ...]
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_gpt2_safetensors import write_safetensors  # noqa: E402


def llama_tensors(a):
    rng = np.random.default_rng(a.seed)
    C, L, V, Fi, H = a.hidden, a.layers, a.vocab, a.intermediate, a.heads
    KVH = a.kv_heads or H
    hd = C // H
    normal = lambda *shape: rng.normal(0.0, 0.02, shape).astype(np.float32)
    t = {"model.embed_tokens.weight": np.zeros((V, C), np.float32) if a.zero_head else normal(V, C)}
    for l in range(L):
        p = f"model.layers.{l}."
        lin = {"self_attn.q_proj": (H * hd, C), "self_attn.k_proj": (KVH * hd, C),
               "self_attn.v_proj": (KVH * hd, C), "self_attn.o_proj": (C, H * hd),
               "mlp.gate_proj": (Fi, C), "mlp.up_proj": (Fi, C), "mlp.down_proj": (C, Fi)}
        for name, shape in lin.items():
            t[p + name + ".weight"] = normal(*shape)
            if a.bias:
                t[p + name + ".bias"] = np.zeros(shape[0], np.float32)
        t[p + "input_layernorm.weight"] = np.ones(C, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(C, np.float32)
        if a.inv_freq:
            t[p + "self_attn.rotary_emb.inv_freq"] = (
                1.0 / 10000.0 ** (np.arange(0, hd, 2) / hd)).astype(np.float32)
    t["model.norm.weight"] = np.ones(C, np.float32)
    if a.untied:
        t["lm_head.weight"] = np.zeros((V, C), np.float32) if a.zero_head else normal(V, C)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    for flag, default in (("layers", 2), ("hidden", 64), ("heads", 4), ("kv-heads", 0),
                          ("intermediate", 128), ("vocab", 4096), ("positions", 64), ("seed", 0)):
        ap.add_argument("--" + flag, type=int, default=default)
    for flag in ("untied", "bias", "zero-head", "inv-freq"):
        ap.add_argument("--" + flag, action="store_true")
    ap.add_argument("--rope-scaling", default=None)
    ap.add_argument("--hidden-act", default="silu")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", llama_tensors(a))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_size": a.hidden, "intermediate_size": a.intermediate,
              "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads or a.heads,
              "num_hidden_layers": a.layers, "max_position_embeddings": a.positions,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "rope_scaling": {"rope_type": a.rope_scaling, "factor": 8.0} if a.rope_scaling else None,
              "vocab_size": a.vocab, "tie_word_embeddings": not a.untied,
              "attention_bias": a.bias, "mlp_bias": a.bias, "hidden_act": a.hidden_act,
              "initializer_range": 0.02, "torch_dtype": "float32"}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"wrote {out}/model.safetensors and config.json ({a.layers} layers, hidden {a.hidden}, "
          f"{a.heads} heads over {a.kv_heads or a.heads} kv heads, vocabulary {a.vocab})")


if __name__ == "__main__":
    main()
