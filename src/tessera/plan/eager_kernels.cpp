#include "tessera/plan/eager_kernels.h"

namespace tessera::plan {

// bf16 activations (2 bytes), upcast to fp32 (4) where the code says .float().
double eager_bytes_per_element(std::string_view kernel) {
  // RMSNorm forward, output = (x.float() * rsqrt(x.float().pow(2).mean(-1) +
  // eps)).type_as(x) * weight: .float() r2 w4, .pow(2) r4 w4, .mean r4, x *
  // rsqrt r4 w4, .type_as r4 w2, * weight r2 w2 (the per-row rsqrt is tiny).
  if (kernel == "rmsnorm_forward") return 6 + 8 + 4 + 8 + 6 + 4;  // 36
  // Its autograd backward: * weight (dx r2 w2; dweight g * y r2 r2 w2 and the
  // row sum r2), .type_as r2 w4, x * r (dx r4 w4; dr (g * x) r4 r4 w4 and its
  // row sum r4), .mean's expand / n w4, .pow(2)'s grad * (2 * x.pow(1)) (the
  // copy r4 w4, the scale r4 w4, the product r4 r4 w4), the two dx summed r4
  // r4 w4, .float() r4 w2.
  if (kernel == "rmsnorm_backward") return 12 + 6 + 8 + 16 + 4 + 28 + 12 + 6;  // 92
  // SwiGLU, w2(silu(w1 x) * w3 x), per element of the ffn width: silu r2 w2,
  // the product r2 r2 w2.
  if (kernel == "swiglu_forward") return 4 + 6;  // 10
  // The product's two gradients (each r2 r2 w2) and silu's (r2 r2 w2).
  if (kernel == "swiglu_backward") return 6 + 6 + 6;  // 18
  return 0;
}

double eager_rope_bytes(const GPTConfig& m, const PlanLayout& L) {
  // Per element of q and k: .float() r2 w4, the complex multiply by
  // freqs_cis r4 w4 (freqs_cis is (T, head_dim / 2), small), .type_as r4 w2.
  // Backward: the same three in reverse (to fp32, the multiply by the
  // conjugate, back to bf16): 20 as well.
  const double per_element = 6 + 8 + 6;
  const double width = double(m.num_heads + m.kv_heads()) * double(m.head_size()) / double(L.par.tp);
  return per_element * double(L.par.micro_batch * m.seq_length) * width;
}

}  // namespace tessera::plan
