#!/usr/bin/python3
"""PyTorch reference for tessera's model family (run with Debian's /usr/bin/python3).

One float64 model, written by hand, for every member of the family: GPT-2
(LayerNorm, learned positions, GELU, biases, tied head) and Llama (RMSNorm,
grouped-query attention with rotary positions in Hugging Face Llama's
rotate_half convention, a SwiGLU MLP, no biases, an untied head), and any mix
of the switches. Each switch is read from the configuration, so the same code
checks them all. It is used three ways:

  * as a script: reads what test_torch_reference.cpp dumped (initial weights,
    the step-1 logits and gradients, 5 steps of losses) and exits nonzero if
    any tensor differs by more than 1e-4 relative (max-abs error over max-abs
    value);
  * by torch_reference_bf16.py, which runs it under bf16 autocast;
  * by tests/ckpt/safetensors_reference.py, which renames an exported Hugging
    Face checkpoint into these names and runs it.

usage: torch_reference.py DUMP_DIR [-v]
"""
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-4
DTYPE = torch.float64


def load(path, n=-1):
    return torch.from_numpy(np.fromfile(path, dtype=np.float32, count=n).astype(np.float64))


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x, base):
    """x (B, H, T, hs): dims i and i + hs/2 rotate by pos * base^(-2i/hs)."""
    T, hs = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, hs, 2, dtype=DTYPE) / hs)          # (hs/2)
    ang = torch.arange(T, dtype=DTYPE)[:, None] * inv[None, :]         # (T, hs/2)
    ang = torch.cat((ang, ang), dim=-1)                                 # (T, hs)
    return x * ang.cos() + rotate_half(x) * ang.sin()


class Reference:
    """The model over named tensors in the engine's names and orientation
    (wte, wpe, h.L.attn.qkv.weight (out, in), ..., ln_f, lm_head).

    config: hidden_size, num_heads, kv_heads, num_layers, vocab_size, and the
    family's switches rmsnorm, norm_epsilon, swiglu, rope, rotary_base. A
    bias, wpe or lm_head is used when present among the tensors.
    """

    def __init__(self, config, tensors):
        self.c = config
        self.params = {n: t.clone().requires_grad_(True) for n, t in tensors.items()}

    @classmethod
    def from_flat(cls, manifest, flat):
        """The tensors of the engine's flat buffer, as the manifest places them."""
        tensors = {}
        for e in manifest["params"]:
            n = int(np.prod(e["shape"]))
            tensors[e["name"]] = flat[e["offset"]:e["offset"] + n].reshape(e["shape"])
        return cls(manifest["config"], tensors)

    def norm(self, x, prefix):
        c, p = self.c, self.params
        if c["rmsnorm"]:
            return rms_norm(x, p[prefix + ".weight"], c["norm_epsilon"])
        return F.layer_norm(x, (x.shape[-1],), p[prefix + ".weight"], p[prefix + ".bias"],
                            c["norm_epsilon"])

    def linear(self, x, prefix):
        p = self.params
        y = x @ p[prefix + ".weight"].T
        return y + p[prefix + ".bias"] if prefix + ".bias" in p else y

    def activation(self, u):
        """GELU (tanh), or SwiGLU of u = [gate | up]."""
        if self.c["swiglu"]:
            gate, up = u.chunk(2, dim=-1)
            return F.silu(gate) * up
        return F.gelu(u, approximate="tanh")

    def mlp(self, h, l):
        """Layer l's MLP of its normed input h (B, T, C); torch_moe_reference.py
        replaces it with the experts."""
        return self.linear(self.activation(self.linear(h, f"h.{l}.mlp.fc")), f"h.{l}.mlp.proj")

    def forward(self, idx):
        c, p = self.c, self.params
        B, T = idx.shape
        C, H, V = c["hidden_size"], c["num_heads"], c["vocab_size"]
        KVH = c["kv_heads"]
        hs = C // H
        x = p["wte"][idx]
        if not c["rope"]:
            x = x + p["wpe"][:T]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for l in range(c["num_layers"]):
            h = self.norm(x, f"h.{l}.ln_1")
            qkv = self.linear(h, f"h.{l}.attn.qkv")
            qq, kk, vv = qkv.split([H * hs, KVH * hs, KVH * hs], dim=-1)
            q = qq.view(B, T, H, hs).transpose(1, 2)
            k = kk.view(B, T, KVH, hs).transpose(1, 2)
            v = vv.view(B, T, KVH, hs).transpose(1, 2)
            if c["rope"]:
                q, k = rope(q, c["rotary_base"]), rope(k, c["rotary_base"])
            # Query head j reads kv head j // (H / KVH).
            k = k.repeat_interleave(H // KVH, dim=1)
            v = v.repeat_interleave(H // KVH, dim=1)
            att = q @ k.transpose(-1, -2) / math.sqrt(hs)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, H * hs)
            x = x + self.linear(y, f"h.{l}.attn.proj")
            x = x + self.mlp(self.norm(x, f"h.{l}.ln_2"), l)
        x = self.norm(x, "ln_f")
        head = p["lm_head.weight"] if "lm_head.weight" in p else p["wte"]
        return x @ head[:V].T  # padding rows never predicted

    def loss(self, tokens):
        logits = self.forward(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


failures = []
worst = [0.0, ""]


def compare(what, ours, ref):
    ours = torch.as_tensor(ours, dtype=DTYPE)
    ref = torch.as_tensor(ref, dtype=DTYPE)
    scale = ref.abs().max().item()
    err = (ours - ref).abs().max().item() / (scale if scale > 0 else 1.0)
    status = "ok" if err <= TOL else "FAIL"
    if err >= worst[0]:
        worst[:] = [err, what]
    if status != "ok" or "-v" in sys.argv:
        print(f"  {status}: {what}: relative error {err:.2e}")
    if status != "ok":
        failures.append(what)


def check_parameter_names(man):
    """What the configuration leaves out must be absent from the engine's list."""
    c = man["config"]
    names = {e["name"] for e in man["params"]}
    expect_absent = []
    if c["rope"]:
        expect_absent.append("wpe")
    if c["rmsnorm"]:
        expect_absent += ["ln_f.bias", "h.0.ln_1.bias", "h.0.ln_2.bias"]
    if not c["add_bias_linear"]:
        expect_absent += ["h.0.attn.proj.bias", "h.0.mlp.fc.bias", "h.0.mlp.proj.bias"]
        if not c.get("add_qkv_bias"):
            expect_absent.append("h.0.attn.qkv.bias")
    if c.get("add_qkv_bias") and "h.0.attn.qkv.bias" not in names:
        failures.append("parameter h.0.attn.qkv.bias should exist (add_qkv_bias)")
    for n in expect_absent:
        if n in names:
            failures.append(f"parameter {n} should not exist")
    if c["untie_embeddings"] != ("lm_head.weight" in names):
        failures.append("lm_head.weight present iff untied")


def main():
    d = Path(sys.argv[1])
    man = json.loads((d / "manifest.json").read_text())
    c = man["config"]
    flat = load(d / "params.f32")  # the whole flat buffer, unit padding included
    B, T, V, GB = c["micro_batch"], c["seq_length"], c["vocab_size"], c["global_batch"]
    tokens = torch.tensor(man["tokens"], dtype=torch.long).view(-1, T + 1)

    check_parameter_names(man)

    ref = Reference.from_flat(man, flat)
    # Logits of micro-batch 0, loss and gradient of the step-1 global batch.
    compare("logits", load(d / "logits.f32", B * T * V).view(B, T, V), ref.forward(tokens[:B, :-1]))
    loss = ref.loss(tokens[:GB])
    compare("loss", man["loss_step1"], loss.item())
    loss.backward()
    grads = load(d / "grads.f32")
    for e in man["params"]:
        size = int(np.prod(e["shape"]))
        g = grads[e["offset"]:e["offset"] + size].view(e["shape"])
        compare(f"grad {e['name']}", g, ref.params[e["name"]].grad)

    # Five AdamW steps from the same start, with the engine's LR per step.
    ref = Reference.from_flat(man, flat)
    decay = [ref.params[e["name"]] for e in man["params"] if e["decay"]]
    no_decay = [ref.params[e["name"]] for e in man["params"] if not e["decay"]]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": c["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1.0, betas=(c["beta1"], c["beta2"]), eps=c["eps"])
    for s, step in enumerate(man["steps"]):
        batch = tokens[s * GB:(s + 1) * GB]
        opt.zero_grad()
        loss = ref.loss(batch)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(ref.params.values()), c["clip_grad"])
        compare(f"step {s + 1} loss", step["loss"], loss.item())
        compare(f"step {s + 1} grad norm", step["grad_norm"], norm.item())
        for g in opt.param_groups:
            g["lr"] = step["lr"]
        opt.step()

    if failures:
        print(f"torch_reference: {len(failures)} mismatches beyond {TOL} relative: {failures[:5]}")
        return 1
    print(f"torch_reference: logits, loss, {len(man['params'])} gradients and "
          f"{len(man['steps'])} AdamW steps agree to {TOL} relative "
          f"(worst: {worst[1]}, {worst[0]:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
