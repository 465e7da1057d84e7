#!/usr/bin/python3
"""Independent reader for `tessera export --format safetensors`, any family.

Reads model.safetensors (or, when there is none, model.safetensors.index.json
and its shards) by hand and config.json as Hugging Face would
(hf_checkpoint.py), checks the config's fixed fields and that the file holds
exactly the names and shapes GPT2LMHeadModel or LlamaForCausalLM (by
config.json's model_type) saves, then renames those tensors into the
float64 reference model of tests/model/torch_reference.py, from the Hugging
Face conventions alone:
  gpt2:  Conv1D orientation (y = x @ W + b, W stored (in, out)), one c_attn
         for q, k, v; the tied LM head (no lm_head.weight in the file).
  llama: nn.Linear orientation (W stored (out, in)); q_proj, k_proj, v_proj
         stacked (grouped-query attention: query head j reads kv head
         j // (heads / kv_heads)), rotary positions in Hugging Face's
         rotate_half convention applied to q_proj's and k_proj's output as
         stored (no permutation), RMSNorm, the SwiGLU MLP
         down(silu(gate(x)) * up(x)), and lm_head or, when
         tie_word_embeddings, embed_tokens.
  qwen2: llama's, with biases on q_proj, k_proj and v_proj alone (added to
         each projection's output before rotary positions, as
         Qwen2Attention's biased nn.Linear does).
  mixtral: llama's attention and norms; each layer's MLP a sparse MoE as
         transformers' MixtralSparseMoeBlock computes it: router logits
         x @ gate.T, the softmax over all experts, the top
         num_experts_per_tok of it renormalised to sum 1, and the weighted
         sum of those experts' w2(silu(w1 x) * w3 x).
  qwen2_moe: qwen2's attention and norms; a dense layer (mlp_only_layers,
         decoder_sparse_step) llama's MLP; a sparse one as transformers'
         Qwen2MoeSparseMoeBlock: the softmax over all num_experts router
         logits, its top num_experts_per_tok, renormalised only when
         norm_topk_prob, the weighted sum of those experts'
         down(silu(gate x) * up x), plus the shared expert's
         down(silu(gate x) * up x) times sigmoid(x . shared_expert_gate).
Compares the loss on the given tokens with the engine's (and the logits,
when the case names them); exits nonzero on any mismatch.

usage: safetensors_reference.py EXPORT_DIR CASE.json
  CASE.json: {"tokens": [[...T+1 ids...], ...], "loss": engine loss,
              "logits": (optional) file of the engine's float32 logits (B, T, vocab)}
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

here = Path(__file__).resolve().parent
sys.path.insert(0, str(here))
sys.path.insert(0, str(here.parent / "model"))
from hf_checkpoint import (gpt2_shapes, llama_shapes, mixtral_shapes, qwen2_moe_shapes,  # noqa: E402
                           qwen2_moe_sparse, qwen2_shapes, read_weights)
from torch_reference import Reference  # noqa: E402


def gpt2_reference(w, cfg):
    """GPT-2's names and Conv1D weights into the reference's (out, in) ones."""
    assert cfg["n_ctx"] == cfg["n_positions"]
    assert "lm_head.weight" not in w, "the head is tied: it must not be written"
    t = {"wte": w["transformer.wte.weight"], "wpe": w["transformer.wpe.weight"],
         "ln_f.weight": w["transformer.ln_f.weight"], "ln_f.bias": w["transformer.ln_f.bias"]}
    ours = {"ln_1": "ln_1", "ln_2": "ln_2", "attn.c_attn": "attn.qkv", "attn.c_proj": "attn.proj",
            "mlp.c_fc": "mlp.fc", "mlp.c_proj": "mlp.proj"}
    for l in range(cfg["n_layer"]):
        for hf, name in ours.items():
            weight = w[f"transformer.h.{l}.{hf}.weight"]
            t[f"h.{l}.{name}.weight"] = weight if hf.startswith("ln_") else weight.T
            t[f"h.{l}.{name}.bias"] = w[f"transformer.h.{l}.{hf}.bias"]
    config = {"hidden_size": cfg["n_embd"], "num_heads": cfg["n_head"], "kv_heads": cfg["n_head"],
              "num_layers": cfg["n_layer"], "vocab_size": cfg["vocab_size"],
              "rmsnorm": False, "norm_epsilon": cfg["layer_norm_epsilon"], "swiglu": False,
              "rope": False, "rotary_base": None}
    return Reference(config, t)


def llama_reference(w, cfg):
    """Llama's names into the reference's: q, k, v and gate, up stacked."""
    assert cfg["head_dim"] == cfg["hidden_size"] // cfg["num_attention_heads"], cfg["head_dim"]
    t = {"wte": w["model.embed_tokens.weight"], "ln_f.weight": w["model.norm.weight"]}
    if not cfg["tie_word_embeddings"]:
        t["lm_head.weight"] = w["lm_head.weight"]
    stacked = {"attn.qkv": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
               "attn.proj": ["self_attn.o_proj"], "mlp.fc": ["mlp.gate_proj", "mlp.up_proj"],
               "mlp.proj": ["mlp.down_proj"]}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t[f"h.{l}.ln_1.weight"] = w[p + "input_layernorm.weight"]
        t[f"h.{l}.ln_2.weight"] = w[p + "post_attention_layernorm.weight"]
        for name, parts in stacked.items():
            for kind in ("weight", "bias"):
                if p + parts[0] + "." + kind in w:
                    t[f"h.{l}.{name}.{kind}"] = torch.cat([w[p + part + "." + kind] for part in parts])
    config = {"hidden_size": cfg["hidden_size"], "num_heads": cfg["num_attention_heads"],
              "kv_heads": cfg["num_key_value_heads"], "num_layers": cfg["num_hidden_layers"],
              "vocab_size": cfg["vocab_size"], "rmsnorm": True, "norm_epsilon": cfg["rms_norm_eps"],
              "swiglu": True, "rope": True, "rotary_base": cfg["rope_theta"]}
    return Reference(config, t)


class MixtralReference(Reference):
    """The reference with Mixtral's sparse MoE block in place of the MLP."""

    def __init__(self, config, tensors, moe):
        super().__init__(config, tensors)
        self.moe = moe  # layer -> (gate (E, C), [(w1, w3, w2) per expert])
        self.topk = config["topk"]

    def mlp(self, h, l):
        gate, experts = self.moe[l]
        B, T, C = h.shape
        return routed_experts(h.reshape(B * T, C), gate, experts, self.topk, True).reshape(B, T, C)


def routed_experts(x, router, experts, topk, renormalise):
    """transformers' sparse MoE blocks (Mixtral's, Qwen2-MoE's) on rows x
    (N, C): the softmax over all experts' router logits, its top-k, divided
    by their sum when `renormalise`, times each chosen expert's
    down(silu(gate x) * up x); experts: [(gate, up, down) weights]."""
    probs = (x @ router.T).softmax(-1)                       # (N, E)
    weights, chosen = probs.topk(topk, dim=-1)               # (N, K)
    if renormalise:
        weights = weights / weights.sum(-1, keepdim=True)
    out = torch.zeros_like(x)
    for j, (wg, wu, wd) in enumerate(experts):
        rows, slot = (chosen == j).nonzero(as_tuple=True)
        if rows.numel():
            xe = x[rows]
            ye = (F.silu(xe @ wg.T) * (xe @ wu.T)) @ wd.T
            out.index_add_(0, rows, ye * weights[rows, slot].unsqueeze(-1))
    return out


def mixtral_reference(w, cfg):
    """Mixtral's names: llama's for attention and norms, the MoE block's here."""
    assert "sliding_window" in cfg and cfg["sliding_window"] is None, cfg.get("sliding_window")
    assert cfg["router_jitter_noise"] == 0, cfg["router_jitter_noise"]
    dense = llama_reference(w, dict(cfg, head_dim=cfg["hidden_size"] // cfg["num_attention_heads"]))
    moe = {}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}.block_sparse_moe."
        moe[l] = (w[p + "gate.weight"],
                  [(w[p + f"experts.{j}.w1.weight"], w[p + f"experts.{j}.w3.weight"],
                    w[p + f"experts.{j}.w2.weight"]) for j in range(cfg["num_local_experts"])])
    config = dict(dense.c, topk=cfg["num_experts_per_tok"])
    return MixtralReference(config, {k: v.detach() for k, v in dense.params.items()}, moe)


class Qwen2MoeReference(Reference):
    """The reference with Qwen2-MoE's sparse block in its sparse layers."""

    def __init__(self, config, tensors, moe):
        super().__init__(config, tensors)
        self.moe = moe  # sparse layer -> (gate (E, C), [(gate, up, down) per expert], shared, shared gate)
        self.topk, self.norm_topk_prob = config["topk"], config["norm_topk_prob"]

    def mlp(self, h, l):
        if l not in self.moe:
            return super().mlp(h, l)
        router, experts, (sg, su, sd), sgate = self.moe[l]
        B, T, C = h.shape
        x = h.reshape(B * T, C)
        out = routed_experts(x, router, experts, self.topk, self.norm_topk_prob)
        shared = (F.silu(x @ sg.T) * (x @ su.T)) @ sd.T
        out = out + torch.sigmoid(x @ sgate.T) * shared        # (N, 1) gate
        return out.reshape(B, T, C)


def qwen2_moe_reference(w, cfg):
    """Qwen2-MoE's names: qwen2's attention, norms and dense MLPs, the sparse blocks here."""
    assert cfg["use_sliding_window"] is False, cfg["use_sliding_window"]
    dense = llama_reference(w, dict(cfg, head_dim=cfg["hidden_size"] // cfg["num_attention_heads"]))
    moe = {}
    for l in range(cfg["num_hidden_layers"]):
        if not qwen2_moe_sparse(cfg, l):
            continue
        p = f"model.layers.{l}.mlp."
        moe[l] = (w[p + "gate.weight"],
                  [(w[p + f"experts.{j}.gate_proj.weight"], w[p + f"experts.{j}.up_proj.weight"],
                    w[p + f"experts.{j}.down_proj.weight"]) for j in range(cfg["num_experts"])],
                  tuple(w[p + f"shared_expert.{n}.weight"] for n in ("gate_proj", "up_proj", "down_proj")),
                  w[p + "shared_expert_gate.weight"])
    config = dict(dense.c, topk=cfg["num_experts_per_tok"], norm_topk_prob=cfg["norm_topk_prob"])
    return Qwen2MoeReference(config, {k: v.detach() for k, v in dense.params.items()}, moe)


# model_type -> (config.json's fixed fields, expected tensors, the reference, tolerance)
FAMILIES = {
    "gpt2": ({"model_type": "gpt2", "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
              "architectures": ["GPT2LMHeadModel"]}, gpt2_shapes, gpt2_reference, 1e-5),
    "llama": ({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
               "rope_scaling": None, "torch_dtype": "float32"}, llama_shapes, llama_reference, 1e-4),
    # Qwen2: Llama's reference (it takes each bias the file holds, here q, k, v).
    "qwen2": ({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu",
               "use_sliding_window": False, "torch_dtype": "float32"}, qwen2_shapes,
              lambda w, cfg: llama_reference(w, dict(cfg, head_dim=cfg["hidden_size"] // cfg["num_attention_heads"])),
              1e-4),
    "mixtral": ({"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "hidden_act": "silu",
                 "torch_dtype": "float32", "output_router_logits": False}, mixtral_shapes,
                mixtral_reference, 1e-5),
    "qwen2_moe": ({"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"],
                   "hidden_act": "silu", "torch_dtype": "float32", "output_router_logits": False},
                  qwen2_moe_shapes, qwen2_moe_reference, 1e-5),
}


def main():
    out, case = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    cfg = json.loads((out / "config.json").read_text())
    fixed, shapes, reference, tol = FAMILIES[cfg["model_type"]]
    for k, v in fixed.items():
        assert cfg[k] == v, (k, cfg[k])
    arrays, meta = read_weights(out)
    assert meta.get("format") == "pt", meta
    expected = shapes(cfg)
    assert set(arrays) == set(expected), sorted(set(arrays) ^ set(expected))
    for k, s in expected.items():
        assert arrays[k].shape == s, (k, arrays[k].shape, s)
    w = {k: torch.from_numpy(a.astype(np.float64)) for k, a in arrays.items()}

    tokens = torch.tensor(case["tokens"], dtype=torch.long)
    idx, tgt = tokens[:, :-1], tokens[:, 1:]
    B, T = idx.shape
    V = cfg["vocab_size"]
    with torch.no_grad():
        logits = reference(w, cfg).forward(idx)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1)).item()
    loss_err = abs(loss - case["loss"]) / abs(loss)
    report = f"loss torch {loss:.8f} engine {case['loss']:.8f} (relative {loss_err:.2e})"
    ok = loss_err <= tol
    if "logits" in case:
        ours = torch.from_numpy(np.fromfile(case["logits"], dtype="<f4").astype(np.float64)).view(B, T, V)
        logit_err = (ours - logits).abs().max().item() / logits.abs().max().item()
        report = f"logits relative error {logit_err:.2e}, " + report
        ok = ok and logit_err <= tol
    print(f"safetensors_reference: {cfg['model_type']}: {'ok' if ok else 'FAIL'}: {report}; "
          f"{len(w)} tensors, tolerance {tol:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
