#!/usr/bin/python3
"""PyTorch reference for tessera's GPT (run with Debian's /usr/bin/python3).

Reads what test_torch_reference.cpp dumped (initial weights, the step-1
logits and gradients, 5 steps of losses), rebuilds the same GPT-2 in PyTorch
in float64 from the same weights and data, and exits nonzero if any tensor
differs by more than 1e-4 relative (max-abs error over max-abs value).
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


class Reference:
    def __init__(self, manifest, flat):
        self.c = manifest["config"]
        self.entries = manifest["params"]
        self.params = {}
        for e in self.entries:
            n = int(np.prod(e["shape"]))
            t = flat[e["offset"]:e["offset"] + n].reshape(e["shape"]).clone()
            self.params[e["name"]] = t.requires_grad_(True)

    def forward(self, idx):
        c, p = self.c, self.params
        B, T = idx.shape
        C, H, V = c["hidden_size"], c["num_heads"], c["vocab_size"]
        x = p["wte"][idx] + p["wpe"][:T]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for l in range(c["num_layers"]):
            q = lambda s: p[f"h.{l}.{s}"]
            h = F.layer_norm(x, (C,), q("ln_1.weight"), q("ln_1.bias"), 1e-5)
            qkv = h @ q("attn.qkv.weight").T + q("attn.qkv.bias")
            qq, kk, vv = qkv.split(C, dim=-1)
            heads = lambda t: t.view(B, T, H, C // H).transpose(1, 2)
            att = heads(qq) @ heads(kk).transpose(-1, -2) / math.sqrt(C // H)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ heads(vv)).transpose(1, 2).reshape(B, T, C)
            x = x + y @ q("attn.proj.weight").T + q("attn.proj.bias")
            h = F.layer_norm(x, (C,), q("ln_2.weight"), q("ln_2.bias"), 1e-5)
            h = F.gelu(h @ q("mlp.fc.weight").T + q("mlp.fc.bias"), approximate="tanh")
            x = x + h @ q("mlp.proj.weight").T + q("mlp.proj.bias")
        x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
        return x @ p["wte"][:V].T  # tied head; padding rows never predicted

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


def main():
    d = Path(sys.argv[1])
    man = json.loads((d / "manifest.json").read_text())
    c = man["config"]
    flat = load(d / "params.f32")  # the whole flat buffer, unit padding included
    B, T, V, GB = c["micro_batch"], c["seq_length"], c["vocab_size"], c["global_batch"]
    tokens = torch.tensor(man["tokens"], dtype=torch.long).view(-1, T + 1)

    ref = Reference(man, flat)
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
    ref = Reference(man, flat)
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
        print(f"torch_reference: {len(failures)} mismatches beyond {TOL} relative")
        return 1
    print(f"torch_reference: logits, loss, {len(man['params'])} gradients and "
          f"{len(man['steps'])} AdamW steps agree to {TOL} relative "
          f"(worst: {worst[1]}, {worst[0]:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
