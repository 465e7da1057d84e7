#include "tessera/kernels/cpu_peak.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tessera/core/timer.h"

namespace tessera::kernels {

bool CpuInfo::has(const std::string& flag) const {
  return flags.find(" " + flag + " ") != std::string::npos;
}

CpuInfo parse_cpuinfo(const std::string& text) {
  CpuInfo c;
  std::istringstream in(text);
  std::string line;
  bool first = true;  // fields of the first processor only (they are alike)
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      if (!c.flags.empty()) first = false;
      continue;
    }
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "cpu MHz") {
      try {
        c.max_mhz = std::max(c.max_mhz, std::stod(value));
      } catch (const std::exception&) {
      }
    }
    if (!first) continue;
    if (key == "vendor_id") c.vendor = value;
    if (key == "model name") c.model_name = value;
    if (key == "cpu family") c.family = std::atoi(value.c_str());
    if (key == "flags" || key == "Features") c.flags = " " + value + " ";
  }
  return c;
}

namespace {

int64_t fp32_flops_per_cycle(const CpuInfo& c) {
  if (c.has("avx512f")) return c.vendor == "AuthenticAMD" && c.family < 0x1A ? 32 : 64;
  if (c.has("avx2") && c.has("fma")) return 32;
  if (c.has("avx")) return 16;
  return 8;
}

}  // namespace

int64_t flops_per_cycle(const CpuInfo& c, Precision p) {
  const int64_t fp32 = fp32_flops_per_cycle(c);
  if (p == Precision::Bf16) {
    if (c.has("amx_bf16")) return 1024;
    if (c.has("avx512_bf16")) return 2 * fp32;
  }
  if (p == Precision::Fp16 && c.has("amx_fp16")) return 1024;
  return fp32;
}

std::string vector_units(const CpuInfo& c, Precision p) {
  if (p == Precision::Bf16 && c.has("amx_bf16")) return "AMX bf16";
  if (p == Precision::Bf16 && c.has("avx512_bf16")) return "AVX512_BF16 dot products";
  if (p == Precision::Fp16 && c.has("amx_fp16")) return "AMX fp16";
  if (c.has("avx512f"))
    return c.vendor == "AuthenticAMD" && c.family < 0x1A ? "AVX-512 FMA on 2 x 256-bit pipes"
                                                          : "AVX-512 FMA, 2 pipes";
  if (c.has("avx2") && c.has("fma")) return "AVX2 FMA, 2 pipes";
  if (c.has("avx")) return "AVX add + multiply";
  return "SSE add + multiply";
}

double measure_clock_ghz() {
#if defined(__x86_64__)
  // 32 dependent adds per iteration: one cycle each, so the loop's own
  // counter and branch run alongside and cost nothing.
  const int64_t iterations = 200000;  // 6.4 M cycles: about 2 ms
  double best = 0;
  for (int rep = 0; rep < 7; ++rep) {
    uint64_t x = 0;
    const double t0 = now_seconds();
    for (int64_t i = 0; i < iterations; ++i) {
      asm volatile(
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
          "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
          : "+r"(x));
    }
    const double s = now_seconds() - t0;
    if (s > 0) best = std::max(best, double(iterations) * 32.0 / s / 1e9);
  }
  return best;
#else
  return 0;
#endif
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

CpuPeak cpu_theoretical_peak(int64_t cores, Precision p) {
  const CpuInfo cpu = parse_cpuinfo(read_text("/proc/cpuinfo"));
  double listed_ghz = cpu.max_mhz / 1e3;
  std::string listed = "/proc/cpuinfo";
  const std::string max_khz = read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (!max_khz.empty()) {
    try {
      listed_ghz = std::stod(max_khz) / 1e6;
      listed = "cpufreq max";
    } catch (const std::exception&) {
    }
  }
  const double measured = measure_clock_ghz();
  CpuPeak r;
  r.cores = cores;
  r.ghz = std::max(listed_ghz, measured);
  r.flops_per_cycle = flops_per_cycle(cpu, p);
  r.tflops = double(cores) * r.ghz * double(r.flops_per_cycle) / 1e3;
  r.description = fmt::format("{} core(s) x {:.2f} GHz ({}) x {} FLOP/cycle ({}, {})", cores, r.ghz,
                              measured >= listed_ghz ? "measured" : listed, r.flops_per_cycle,
                              vector_units(cpu, p), precision_name(p));
  return r;
}

}  // namespace tessera::kernels
