#!/usr/bin/python3
"""Writes a Hugging Face checkpoint (model.safetensors + config.json) of the
GPT-2 or the Llama family, independently of tessera, for the import and
fine-tuning tests and the README's fine-tuning demo. numpy only; names,
shapes and the file format come from hf_checkpoint.py.

The weights follow each family's initialisation: normal(0, 0.02), unit norm
gains, zero biases; GPT-2's residual projections 0.02 / sqrt(2 n_layer) and
positions 0.01. Options make the files the importer must refuse or accept.

gpt2 (GPT2LMHeadModel, Conv1D (in, out) orientation):
  --extra-layer         also h.<n_layer>.* tensors (a file of a deeper model)
  --untied-head         an lm_head.weight that differs from wte
  --tied-head-copy      an lm_head.weight equal to wte (a tied head saved twice)
  --mask-buffers        h.N.attn.bias / attn.masked_bias (older transformers)
  --no-prefix           names without "transformer." (the hub's gpt2 file)
llama (LlamaForCausalLM, nn.Linear (out, in) orientation):
  --kv-heads N          grouped-query attention (default: as many as --heads)
  --untied              an lm_head.weight of its own (tie_word_embeddings false)
  --bias                attention_bias and mlp_bias: every projection has a bias
  --inv-freq            each layer's self_attn.rotary_emb.inv_freq buffer
                        (older transformers saved it)
  --rope-scaling TYPE   config.json's rope_scaling {"rope_type": TYPE, "factor": 8}
  --hidden-act NAME     config.json's hidden_act (default silu)
both:
  --zero-head           the embedding (and any head) all zeros: every logit 0,
                        the loss exactly ln(vocab)

usage: make_safetensors.py {gpt2,llama} OUT_DIR [--layers 2 --hidden 64 --heads 4
       --vocab 4096 --positions 64 --seed 0 (llama: --intermediate 128) ...]
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_checkpoint import gpt2_layer_shapes, llama_layer_shapes, write_safetensors  # noqa: E402


def gpt2_config(a):
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": a.layers,
            "n_embd": a.hidden, "n_head": a.heads, "n_positions": a.positions, "n_ctx": a.positions,
            "n_inner": None, "vocab_size": a.vocab, "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5, "initializer_range": 0.02,
            "tie_word_embeddings": True}


def gpt2_tensors(a, rng):
    C, L, V, P = a.hidden, a.layers, a.vocab, a.positions
    normal = lambda shape, std=0.02: rng.normal(0.0, std, shape).astype(np.float32)
    t = {"wte.weight": np.zeros((V, C), np.float32) if a.zero_head else normal((V, C)),
         "wpe.weight": normal((P, C), std=0.01)}
    proj_std = 0.02 / math.sqrt(2 * L)
    for l in range(L + (1 if a.extra_layer else 0)):
        for name, shape in gpt2_layer_shapes(C, 4 * C).items():
            if name.endswith(".bias"):
                x = np.zeros(shape, np.float32)
            elif name.startswith("ln_"):
                x = np.ones(shape, np.float32)
            else:  # the residual projections start smaller
                x = normal(shape, std=proj_std if name.endswith("c_proj.weight") else 0.02)
            t[f"h.{l}.{name}"] = x
        if a.mask_buffers:
            t[f"h.{l}.attn.bias"] = np.tril(np.ones((P, P), np.float32)).reshape(1, 1, P, P)
            t[f"h.{l}.attn.masked_bias"] = np.array(-1e4, np.float32)
    t.update({"ln_f.weight": np.ones(C, np.float32), "ln_f.bias": np.zeros(C, np.float32)})
    prefix = "" if a.no_prefix else "transformer."
    out = {prefix + k: v for k, v in t.items()}
    if a.untied_head:
        out["lm_head.weight"] = normal((V, C))
    elif a.tied_head_copy:
        out["lm_head.weight"] = t["wte.weight"].copy()
    return out


def llama_config(a):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": a.hidden, "intermediate_size": a.intermediate,
            "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads or a.heads,
            "num_hidden_layers": a.layers, "max_position_embeddings": a.positions,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "rope_scaling": {"rope_type": a.rope_scaling, "factor": 8.0} if a.rope_scaling else None,
            "vocab_size": a.vocab, "tie_word_embeddings": not a.untied,
            "attention_bias": a.bias, "mlp_bias": a.bias, "hidden_act": a.hidden_act,
            "initializer_range": 0.02, "torch_dtype": "float32"}


def llama_tensors(a, rng):
    C, L, V, H = a.hidden, a.layers, a.vocab, a.heads
    hd = C // H
    normal = lambda shape: rng.normal(0.0, 0.02, shape).astype(np.float32)
    embedding = lambda: np.zeros((V, C), np.float32) if a.zero_head else normal((V, C))
    t = {"model.embed_tokens.weight": embedding()}
    for l in range(L):
        p = f"model.layers.{l}."
        for name, shape in llama_layer_shapes(C, H, a.kv_heads or H, a.intermediate, a.bias, a.bias).items():
            if name.endswith(".bias"):
                t[p + name] = np.zeros(shape, np.float32)
            elif name.endswith("layernorm.weight"):
                t[p + name] = np.ones(shape, np.float32)
            else:
                t[p + name] = normal(shape)
        if a.inv_freq:
            t[p + "self_attn.rotary_emb.inv_freq"] = (
                1.0 / 10000.0 ** (np.arange(0, hd, 2) / hd)).astype(np.float32)
    t["model.norm.weight"] = np.ones(C, np.float32)
    if a.untied:
        t["lm_head.weight"] = embedding()
    return t


FAMILIES = {"gpt2": (gpt2_tensors, gpt2_config), "llama": (llama_tensors, llama_config)}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("out")
    for flag, default in (("layers", 2), ("hidden", 64), ("heads", 4), ("vocab", 4096),
                          ("positions", 64), ("seed", 0)):
        shared.add_argument("--" + flag, type=int, default=default)
    shared.add_argument("--zero-head", action="store_true")
    family = ap.add_subparsers(dest="family", required=True)
    gpt2 = family.add_parser("gpt2", parents=[shared])
    for flag in ("extra-layer", "untied-head", "tied-head-copy", "mask-buffers", "no-prefix"):
        gpt2.add_argument("--" + flag, action="store_true")
    llama = family.add_parser("llama", parents=[shared])
    llama.add_argument("--kv-heads", type=int, default=0)
    llama.add_argument("--intermediate", type=int, default=128)
    for flag in ("untied", "bias", "inv-freq"):
        llama.add_argument("--" + flag, action="store_true")
    llama.add_argument("--rope-scaling", default=None)
    llama.add_argument("--hidden-act", default="silu")
    return ap.parse_args()


def main():
    a = parse_args()
    tensors, config = FAMILIES[a.family]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", tensors(a, np.random.default_rng(a.seed)))
    (out / "config.json").write_text(json.dumps(config(a), indent=2) + "\n")
    kv = f" over {a.kv_heads or a.heads} kv heads" if a.family == "llama" else ""
    print(f"wrote {out}/model.safetensors and config.json ({a.family}, {a.layers} layers, "
          f"hidden {a.hidden}, {a.heads} heads{kv}, vocabulary {a.vocab}, {a.positions} positions)")


if __name__ == "__main__":
    main()
