#!/usr/bin/python3
"""PyTorch reference for tessera's mixture-of-experts layer (docs/moe.md),
run with Debian's /usr/bin/python3 by test_torch_moe.cpp.

torch_reference.py's float64 model with each MoE layer's MLP replaced by a
router and experts written here from the definitions, not from the
engine's kernels:
  * the router's logits, its top-k experts per token (the largest logits,
    the lowest expert index on a tie: a stable sort), and gates = the
    softmax over the chosen logits (Megatron's default), or under
    pre_softmax (--moe-router-pre-softmax) the softmax over all E logits at
    the chosen experts, not renormalised;
  * capacity: expert e keeps the first `capacity` tokens that chose it in
    (b, t) order, the others add nothing;
  * each expert an MLP of the dense one's shapes (GELU or SwiGLU);
  * a shared expert (when the parameters hold one): an MLP of its own
    width on every token, added, times sigmoid(x . w_gate) under its gate;
  * the Switch/GShard aux loss E / (N^2 K) * sum_e P_e f_e (f_e: the
    choices of e, a constant; under seq_aux_loss the same per sequence of T
    tokens, averaged) and the z-loss mean(logsumexp^2), each times
    its coefficient, added to each micro-batch's mean token loss; the step's
    objective is the mean over its micro-batches.
It compares the logits of micro-batch 0, the step-1 loss, every gradient,
and the engine's routing stats (aux, z, dropped) to TOL relative.

usage: torch_moe_reference.py DUMP_DIR [-v]
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch_reference as tr  # noqa: E402

TOL = 1e-5
tr.TOL = TOL


class MoeReference(tr.Reference):
    def __init__(self, config, tensors):
        super().__init__(config, tensors)
        self.moe_losses = []  # this micro-batch's coefficient-weighted aux + z, per MoE layer
        self.stats = []       # (aux, z, dropped) per MoE layer

    def mlp(self, h, l):
        c, p = self.c, self.params
        if c["num_experts"] == 0 or l % c["moe_layer_freq"] != 0:
            return super().mlp(h, l)
        B, T, C = h.shape
        N, E, K, cap = B * T, c["num_experts"], c["topk"], c["capacity"]
        x = h.reshape(N, C)
        logits = x @ p[f"h.{l}.mlp.router.weight"].T                         # (N, E)
        order = torch.sort(-logits.detach(), dim=-1, stable=True).indices[:, :K]  # (N, K)
        if c.get("pre_softmax"):
            gates = logits.softmax(-1).gather(1, order)                        # (N, K)
        else:
            gates = logits.gather(1, order).softmax(-1)                        # (N, K)
        keep = torch.zeros(N, K, dtype=torch.bool)
        fill = [0] * E
        for n in range(N):
            for k in range(K):
                e = int(order[n, k])
                if fill[e] < cap:
                    keep[n, k] = True
                    fill[e] += 1
        pre = f"h.{l}.mlp.experts"
        out = torch.zeros(N, C, dtype=tr.DTYPE)
        for e in range(E):
            rows, ks = ((order == e) & keep).nonzero(as_tuple=True)
            if len(rows) == 0:
                continue
            u = x[rows] @ p[pre + ".fc.weight"][e].T
            if pre + ".fc.bias" in p:
                u = u + p[pre + ".fc.bias"][e]
            y = self.activation(u) @ p[pre + ".proj.weight"][e].T
            if pre + ".proj.bias" in p:
                y = y + p[pre + ".proj.bias"][e]
            out = out.index_add(0, rows, gates[rows, ks][:, None] * y)
        # The shared expert: a dense MLP every token runs, its output added,
        # scaled per token by sigmoid(x . w_gate) when it has a gate.
        sh = f"h.{l}.mlp.shared_expert"
        if sh + ".fc.weight" in p:
            u = x @ p[sh + ".fc.weight"].T
            if sh + ".fc.bias" in p:
                u = u + p[sh + ".fc.bias"]
            y = self.activation(u) @ p[sh + ".proj.weight"].T
            if sh + ".proj.bias" in p:
                y = y + p[sh + ".proj.bias"]
            if f"h.{l}.mlp.shared_expert_gate.weight" in p:
                y = torch.sigmoid(x @ p[f"h.{l}.mlp.shared_expert_gate.weight"].T) * y  # (N, 1)
            out = out + y
        # Switch over groups of G tokens (the micro-batch, or each sequence
        # under seq_aux_loss), averaged over the groups.
        G = T if c["load_balancing"] == "seq_aux_loss" else N
        probs = logits.softmax(-1).view(N // G, G, E)
        choices = F.one_hot(order, E).sum(1).view(N // G, G, E).sum(1).to(tr.DTYPE)  # a constant
        aux = (E / (G * G * K) * (probs.sum(1) * choices).sum(-1)).mean()
        z = torch.logsumexp(logits, -1).pow(2).mean()
        aux_coeff = 0.0 if c["load_balancing"] == "none" else c["aux_coeff"]
        self.moe_losses.append(aux_coeff * aux + c["z_coeff"] * z)
        self.stats.append((aux.item(), z.item(), int((~keep).sum())))
        return out.view(B, T, C)

    def micro_batch_loss(self, tokens):
        """(mean token loss, the objective: that plus the MoE losses)."""
        self.moe_losses, self.stats = [], []
        ce = self.loss(tokens)
        return ce, ce + sum(self.moe_losses)


def main():
    d = Path(sys.argv[1])
    man = json.loads((d / "manifest.json").read_text())
    c = man["config"]
    flat = tr.load(d / "params.f32")
    B, T, V = c["micro_batch"], c["seq_length"], c["vocab_size"]
    mbs = c["global_batch"] // B
    tokens = torch.tensor(man["tokens"], dtype=torch.long).view(-1, T + 1)

    ref = MoeReference.from_flat(man, flat)
    tr.compare("logits", tr.load(d / "logits.f32", B * T * V).view(B, T, V),
               ref.forward(tokens[:B, :-1]))
    ce_sum = 0.0
    for k in range(mbs):
        ce, objective = ref.micro_batch_loss(tokens[k * B:(k + 1) * B])
        (objective / mbs).backward()
        ce_sum += ce.item()
        for i, (ours, theirs) in enumerate(zip(man["moe_stats"][k], ref.stats)):
            tr.compare(f"micro-batch {k} moe layer {i} aux loss", ours[0], theirs[0])
            tr.compare(f"micro-batch {k} moe layer {i} z-loss", ours[1], theirs[1])
            if ours[2] != theirs[2]:
                tr.failures.append(f"micro-batch {k} moe layer {i}: {ours[2]} tokens dropped, "
                                   f"reference {theirs[2]}")
    tr.compare("loss", man["loss_step1"], ce_sum / mbs)
    grads = tr.load(d / "grads.f32")
    for e in man["params"]:
        size = int(np.prod(e["shape"]))
        g = grads[e["offset"]:e["offset"] + size].view(e["shape"])
        tr.compare(f"grad {e['name']}", g, ref.params[e["name"]].grad)

    if tr.failures:
        print(f"torch_moe_reference: {len(tr.failures)} mismatches beyond {TOL} relative: "
              f"{tr.failures[:5]}")
        return 1
    dropped = sum(s[2] for s in man["moe_stats"][0])
    print(f"torch_moe_reference: logits, loss, routing stats and {len(man['params'])} gradients "
          f"agree to {TOL} relative ({dropped} choices dropped in micro-batch 0; worst: "
          f"{tr.worst[1]}, {tr.worst[0]:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
