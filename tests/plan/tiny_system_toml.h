// The smallest system file the loader accepts: one CPU-like device (0.2
// TFLOP/s fp32, 10 GB/s), 2 per node, one network tier. Tests append their
// own tables or keys to it (a [kernels] table, a tier's factors).
#pragma once
#include <string>

inline const std::string kTinySystemToml = R"(
name = "k"
[device]
memory_GB = 16.0
memory_bandwidth_GBps = 10.0
memory_efficiency = 1.0
peak_TFLOPs = { fp32 = 0.2 }
[node]
devices = 2
[[network]]
ranks = 0
bandwidth_GBps = 5.0
latency_us = 1.0
)";
