"""Hugging Face checkpoints by hand, independently of tessera (numpy only).

The safetensors format (8-byte little-endian header length, a JSON header
padded to 8 bytes, raw little-endian tensors) and the state-dict names and
shapes of each family tessera exchanges with Hugging Face: GPT2LMHeadModel
(Conv1D orientation, W stored (in, out)) and LlamaForCausalLM (nn.Linear
orientation, W stored (out, in)). make_safetensors.py writes files with it and
safetensors_reference.py reads what `tessera export` wrote with it, so the
two agree on the names by construction and each stays independent of the
engine's own exporter.
"""
import json
import struct
from pathlib import Path

import numpy as np


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


def read_safetensors(path):
    """(name -> float32 array, metadata); refuses gaps, overlaps and trailing bytes."""
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
        tensors[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(h["shape"])
    assert end == len(data), "trailing bytes after the last tensor"
    return tensors, meta


def read_weights(directory):
    """(name -> float32 array, metadata) of a saved model's directory, found
    as transformers' from_pretrained finds them: model.safetensors first,
    else model.safetensors.index.json and the shards its weight_map names.
    Refuses a shard holding other tensors than the map places there, a
    tensor in two shards, shard metadata that differs, and a total_size that
    is not the tensors' data bytes."""
    directory = Path(directory)
    if (directory / "model.safetensors").is_file():
        return read_safetensors(directory / "model.safetensors")
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    weight_map = index["weight_map"]
    tensors, meta = {}, None
    for shard in sorted(set(weight_map.values())):
        assert "/" not in shard and shard != "..", shard
        part, part_meta = read_safetensors(directory / shard)
        placed = {k for k, v in weight_map.items() if v == shard}
        assert set(part) == placed, (shard, sorted(set(part) ^ placed))
        assert not set(part) & set(tensors), sorted(set(part) & set(tensors))
        assert meta is None or part_meta == meta, (shard, part_meta, meta)
        tensors.update(part)
        meta = part_meta
    total = sum(a.nbytes for a in tensors.values())
    assert index["metadata"]["total_size"] == total, (index["metadata"], total)
    return tensors, meta


def gpt2_layer_shapes(C, inner):
    """One GPT-2 block's tensors, name suffix -> shape, in state-dict order."""
    return {"ln_1.weight": (C,), "ln_1.bias": (C,),
            "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
            "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
            "ln_2.weight": (C,), "ln_2.bias": (C,),
            "mlp.c_fc.weight": (C, inner), "mlp.c_fc.bias": (inner,),
            "mlp.c_proj.weight": (inner, C), "mlp.c_proj.bias": (C,)}


def llama_layer_shapes(C, H, KVH, Fi, attention_bias, mlp_bias):
    """One Llama block's tensors, name suffix -> shape, in state-dict order."""
    hd = C // H
    lin = {"self_attn.q_proj": (H * hd, C), "self_attn.k_proj": (KVH * hd, C),
           "self_attn.v_proj": (KVH * hd, C), "self_attn.o_proj": (C, H * hd),
           "mlp.gate_proj": (Fi, C), "mlp.up_proj": (Fi, C), "mlp.down_proj": (C, Fi)}
    t = {}
    for name, shape in lin.items():
        t[name + ".weight"] = shape
        if attention_bias if name.startswith("self_attn") else mlp_bias:
            t[name + ".bias"] = (shape[0],)
    t["input_layernorm.weight"] = (C,)
    t["post_attention_layernorm.weight"] = (C,)
    return t


def gpt2_shapes(cfg):
    """Every tensor a GPT2LMHeadModel of config.json `cfg` saves (the head is tied)."""
    C, L, V, P = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    t = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (P, C)}
    for l in range(L):
        for name, shape in gpt2_layer_shapes(C, cfg["n_inner"] or 4 * C).items():
            t[f"transformer.h.{l}.{name}"] = shape
    t.update({"transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)})
    return t


def llama_shapes(cfg):
    """Every tensor a LlamaForCausalLM of config.json `cfg` saves."""
    C, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    t = {"model.embed_tokens.weight": (V, C)}
    for l in range(L):
        layer = llama_layer_shapes(C, cfg["num_attention_heads"], cfg["num_key_value_heads"],
                                   cfg["intermediate_size"], cfg["attention_bias"], cfg["mlp_bias"])
        for name, shape in layer.items():
            t[f"model.layers.{l}.{name}"] = shape
    t["model.norm.weight"] = (C,)
    if not cfg["tie_word_embeddings"]:
        t["lm_head.weight"] = (V, C)
    return t


def qwen2_shapes(cfg):
    """Every tensor a Qwen2ForCausalLM of config.json `cfg` saves: Llama's,
    with biases on q_proj, k_proj and v_proj and nowhere else."""
    t = llama_shapes(dict(cfg, attention_bias=False, mlp_bias=False))
    for l in range(cfg["num_hidden_layers"]):
        for proj in ("q_proj", "k_proj", "v_proj"):
            name = f"model.layers.{l}.self_attn.{proj}"
            t[name + ".bias"] = (t[name + ".weight"][0],)
    return t


def mixtral_shapes(cfg):
    """Every tensor a MixtralForCausalLM of config.json `cfg` saves: Llama's
    attention and norms (no biases), and per layer a router (gate) and
    num_local_experts experts w1 (gate), w3 (up), w2 (down)."""
    C, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    E, Fi = cfg["num_local_experts"], cfg["intermediate_size"]
    t = {"model.embed_tokens.weight": (V, C)}
    for l in range(L):
        layer = llama_layer_shapes(C, cfg["num_attention_heads"], cfg["num_key_value_heads"], Fi,
                                   False, False)
        for name, shape in layer.items():
            if not name.startswith("mlp."):
                t[f"model.layers.{l}.{name}"] = shape
        moe = f"model.layers.{l}.block_sparse_moe."
        t[moe + "gate.weight"] = (E, C)
        for j in range(E):
            t[moe + f"experts.{j}.w1.weight"] = (Fi, C)
            t[moe + f"experts.{j}.w3.weight"] = (Fi, C)
            t[moe + f"experts.{j}.w2.weight"] = (C, Fi)
    t["model.norm.weight"] = (C,)
    if not cfg["tie_word_embeddings"]:
        t["lm_head.weight"] = (V, C)
    return t


def qwen2_moe_sparse(cfg, l):
    """Qwen2MoeDecoderLayer's rule: layer l is sparse (experts) unless it is
    in mlp_only_layers or (l + 1) is not a multiple of decoder_sparse_step."""
    return (l not in cfg.get("mlp_only_layers", []) and cfg["num_experts"] > 0
            and (l + 1) % cfg.get("decoder_sparse_step", 1) == 0)


def qwen2_moe_shapes(cfg):
    """Every tensor a Qwen2MoeForCausalLM of config.json `cfg` saves: Qwen2's
    attention (q, k, v biases) and norms; a dense layer's Qwen2MoeMLP of
    intermediate_size; a sparse layer's router (mlp.gate), num_experts
    experts of moe_intermediate_size, a shared expert of
    shared_expert_intermediate_size and its gate (1, C)."""
    t = qwen2_shapes(cfg)
    C, E = cfg["hidden_size"], cfg["num_experts"]
    Fe, S = cfg["moe_intermediate_size"], cfg["shared_expert_intermediate_size"]
    for l in range(cfg["num_hidden_layers"]):
        if not qwen2_moe_sparse(cfg, l):
            continue
        p = f"model.layers.{l}.mlp."
        for name in ("gate_proj", "up_proj", "down_proj"):
            del t[p + name + ".weight"]
        t[p + "gate.weight"] = (E, C)
        for j in range(E):
            t[p + f"experts.{j}.gate_proj.weight"] = (Fe, C)
            t[p + f"experts.{j}.up_proj.weight"] = (Fe, C)
            t[p + f"experts.{j}.down_proj.weight"] = (C, Fe)
        t[p + "shared_expert.gate_proj.weight"] = (S, C)
        t[p + "shared_expert.up_proj.weight"] = (S, C)
        t[p + "shared_expert.down_proj.weight"] = (C, S)
        t[p + "shared_expert_gate.weight"] = (1, C)
    return t
