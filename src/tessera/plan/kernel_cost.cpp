#include "tessera/plan/kernel_cost.h"

#include "tessera/plan/system.h"

namespace tessera::plan {

double kernel_bytes_per_element(Kernel k, double e) {
  switch (k) {
    case Kernel::LayerNormForward: return 2 * e;   // read x, write y (the row statistics are tiny)
    case Kernel::LayerNormBackward: return 4 * e;  // read x, dy, dresid; write dresid
    case Kernel::GeluForward: return 2 * e;        // read, write
    case Kernel::GeluBackward: return 3 * e;       // read x, dy; write dx
    case Kernel::Residual: return 3 * e;           // read two, write one
    case Kernel::BiasAdd: return 2 * e;            // read-modify-write the output
    case Kernel::BiasGrad: return e;               // read dY once
    case Kernel::EmbeddingForward: return 3 * e;   // token row, position row, output
    case Kernel::EmbeddingBackward: return 3 * e;  // dY, read-modify-write the table rows
    case Kernel::CrossEntropyForward: return 8;    // fp32 logits read twice (max, sum of exp)
    case Kernel::CrossEntropyBackward: return 8;   // read logits, write their gradient
    case Kernel::AdamW: return 28;                 // fp32 master, m, v read+write; gradient; weight
    case Kernel::GradNorm: return 4;               // read each fp32 gradient
    case Kernel::RMSNormForward: return 2 * e;     // as LayerNorm's (one statistic, not two)
    case Kernel::RMSNormBackward: return 4 * e;
    case Kernel::SwigluForward: return 3 * e;      // read gate and up, write their product
    case Kernel::SwigluBackward: return 5 * e;     // read gate, up, dy; write d(gate, up)
    case Kernel::Dropout: return 8;                // fp32 read-modify-write; the mask is drawn, not stored
    case Kernel::AttentionDropout: return 0;       // drawn in registers: no traffic, unpriced unmeasured
    case Kernel::kCount: break;
  }
  return 0;
}

double kernel_seconds(const SystemSpec& sys, Kernel k, double elements, double element_bytes) {
  if (elements <= 0) return 0;
  const double measured = sys.kernel_seconds_per_element[size_t(k)];
  if (measured > 0) return measured * elements;
  // At the bandwidth a streaming kernel achieves, not the datasheet's.
  return kernel_bytes_per_element(k, element_bytes) * elements / sys.achieved_memory_bandwidth();
}

}  // namespace tessera::plan
