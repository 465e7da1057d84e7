// A seeded mutation fuzzer, no libFuzzer needed: each case takes a valid
// seed input, applies a few random mutations (bit flips, interesting bytes,
// interesting numbers spliced over digits, chunk copies, cuts and inserts),
// and runs one parser in-process on the result.
//
// The contract under test is the CLI's: every input ends as success (exit 0)
// or a tessera::Error (one line, exit 2). An Error without a message (a
// silent exit 2) or with a message longer than kMaxErrorBytes (an input
// quoted whole instead of one line) is a failure. Any other exception is a failure,
// recorded with the input that caused it; a crash kills the process (the
// test fails); a case that runs longer than kCaseSeconds is a hang, reported
// by SIGALRM with the case number before the process exits 3.
//
// Cases are reproducible: case i of target t is fully determined by
// (seed, t, i), so a failure is replayed with the same seed and case count.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/core/rng.h"

namespace tessera::fuzz {

using Bytes = std::string;

// Cases per target: TESSERA_FUZZ_CASES, else `fallback` (the CI budget).
inline int64_t case_count(int64_t fallback) {
  const char* s = std::getenv("TESSERA_FUZZ_CASES");
  return s && *s ? std::max<int64_t>(1, std::atoll(s)) : fallback;
}

// TESSERA_FUZZ_VERBOSE=1: print every case's error line (to see what the
// mutations reach, and that the messages read well).
inline bool verbose() {
  const char* s = std::getenv("TESSERA_FUZZ_VERBOSE");
  return s && *s && *s != '0';
}

inline uint64_t fuzz_seed() {
  const char* s = std::getenv("TESSERA_FUZZ_SEED");
  return s && *s ? std::strtoull(s, nullptr, 10) : 20261130;
}

// A deterministic stream of random numbers for one case.
class Rand {
 public:
  Rand(uint64_t seed, uint64_t target, uint64_t index) : a_(seed), b_(target), c_(index) {}
  uint64_t next() { return rng_u64(a_, b_, c_ * 4096 + n_++); }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool chance(int percent) { return below(100) < uint64_t(percent); }

 private:
  uint64_t a_, b_, c_, n_ = 0;
};

inline const std::vector<std::string>& interesting_numbers() {
  static const std::vector<std::string> v = {
      "0", "-1", "1", "2", "3", "7", "255", "256", "65535", "65536", "2147483647", "-2147483648",
      "4294967295", "4294967296", "9223372036854775807", "-9223372036854775808",
      "18446744073709551615", "18446744073709551616", "576460752303423496", "1e308", "-1e308",
      "nan", "inf", "0.5", "\"x\"", "[]", "{}", "null", "true"};
  return v;
}

// One mutation of `in`. Positions fall in [0, focus) nine times in ten, so
// the header of a large binary file gets most of the attention.
inline void mutate_once(Bytes& in, Rand& r, size_t focus) {
  if (in.empty()) {
    in.push_back(char(r.next()));
    return;
  }
  const size_t span = (focus && focus < in.size() && r.chance(90)) ? focus : in.size();
  const size_t at = r.below(span);
  switch (r.below(8)) {
    case 0: in[at] = char(in[at] ^ (1 << r.below(8))); break;  // bit flip
    case 1: {  // interesting byte
      static const unsigned char kBytes[] = {0, 1, 0x7f, 0x80, 0xff, '"', '[', '{', ',', '\n', '='};
      in[at] = char(kBytes[r.below(sizeof kBytes)]);
      break;
    }
    case 2: {  // interesting little-endian 8-byte value
      const uint64_t vals[] = {0, 1, ~0ull, 1ull << 63, (1ull << 63) - 1, 1ull << 32, 1ull << 58};
      uint64_t v = vals[r.below(7)];
      for (size_t k = 0; k < 8 && at + k < in.size(); ++k) in[at + k] = char(v >> (8 * k));
      break;
    }
    case 3: {  // splice an interesting number over a run of digits (text formats)
      size_t b = at;
      while (b < in.size() && !(in[b] >= '0' && in[b] <= '9')) ++b;
      size_t e = b;
      while (e < in.size() && ((in[e] >= '0' && in[e] <= '9') || in[e] == '-' || in[e] == '.')) ++e;
      const auto& nums = interesting_numbers();
      if (b < in.size()) in.replace(b, e - b, nums[r.below(nums.size())]);
      break;
    }
    case 4: in.resize(at); break;                          // cut the rest off
    case 5: in.erase(at, 1 + r.below(16)); break;          // delete a chunk
    case 6: {                                              // duplicate a chunk
      const size_t n = std::min<size_t>(1 + r.below(64), in.size() - at);
      in.insert(r.below(in.size()), in.substr(at, n));
      break;
    }
    default: in.insert(at, 1 + r.below(4), char(r.next())); break;  // insert bytes
  }
}

inline Bytes mutate(const Bytes& seed, Rand& r, size_t focus) {
  Bytes out = seed;
  const int n = 1 + int(r.below(4));
  for (int i = 0; i < n; ++i) mutate_once(out, r, focus);
  return out;
}

struct Tally {
  int64_t cases = 0, ok = 0, errors = 0;  // errors: tessera::Error, the "exit 2"
  std::vector<std::string> failures;      // anything else, with the case number
  double slowest_s = 0;                   // the longest case (a hang is kCaseSeconds)
  int64_t slowest_case = -1;
};

inline volatile sig_atomic_t g_case = -1;
inline const char* g_target = "";
inline const Bytes* g_input = nullptr;  // the case running, saved when it hangs

// Reports the hang and saves its input to /tmp/tessera_fuzz_hang_TARGET_CASE
// (to replay: TESSERA_FUZZ_FROM=CASE TESSERA_FUZZ_CASES=1, or read it).
inline void on_hang(int) {
  char path[160], msg[320];
  std::snprintf(path, sizeof path, "/tmp/tessera_fuzz_hang_%s_%ld", g_target, long(g_case));
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0 && g_input != nullptr) {
    ssize_t ignored = ::write(fd, g_input->data(), g_input->size());
    (void)ignored;
  }
  if (fd >= 0) ::close(fd);
  int n = std::snprintf(msg, sizeof msg,
                        "fuzz: HANG in target %s, case %ld (over the time limit); input in %s\n",
                        g_target, long(g_case), fd >= 0 ? path : "(not saved)");
  ssize_t ignored = ::write(2, msg, size_t(n));
  (void)ignored;
  std::_Exit(3);
}

// The first case to run: TESSERA_FUZZ_FROM (to replay one case), else 0.
inline int64_t first_case() {
  const char* s = std::getenv("TESSERA_FUZZ_FROM");
  return s && *s ? std::max<int64_t>(0, std::atoll(s)) : 0;
}

inline constexpr unsigned kCaseSeconds = 20;
// An error line longer than this quotes its input instead of naming it
// (tessera::clipped keeps a quoted value to ~200 bytes).
inline constexpr size_t kMaxErrorBytes = 4000;

// Runs `cases` mutated inputs of `seeds` through `run`. `focus`: the bytes
// most mutations should land in (0: anywhere).
// A custom mutator for one case (e.g. structure-aware); `mutate` when null.
using Mutator = std::function<Bytes(const Bytes& seed, Rand& r)>;

// `custom_percent`: the share of cases the custom mutator makes (the rest
// are byte mutations).
inline Tally run_cases(const char* target, uint64_t target_id, const std::vector<Bytes>& seeds,
                       int64_t cases, size_t focus, const std::function<void(const Bytes&)>& run,
                       const Mutator& custom = nullptr, int custom_percent = 50) {
  Tally t;
  g_target = target;
  ::signal(SIGALRM, on_hang);
  const uint64_t seed = fuzz_seed();
  const int64_t from = first_case();
  for (int64_t i = from; i < from + cases; ++i) {
    Rand r(seed, target_id, uint64_t(i));
    const Bytes& seed_input = seeds[r.below(seeds.size())];
    const Bytes input =
        custom && r.chance(custom_percent) ? custom(seed_input, r) : mutate(seed_input, r, focus);
    g_case = sig_atomic_t(i);
    g_input = &input;
    const auto start = std::chrono::steady_clock::now();
    ::alarm(kCaseSeconds);
    try {
      run(input);
      ++t.ok;
    } catch (const Error& e) {
      const size_t len = std::strlen(e.what());
      if (len == 0)
        t.failures.push_back("case " + std::to_string(i) + ": an error without a message");
      else if (len > kMaxErrorBytes)
        t.failures.push_back("case " + std::to_string(i) + ": a " + std::to_string(len) +
                             "-byte error line: " + std::string(e.what(), 300) + "...");
      else
        ++t.errors;
      if (verbose()) std::fprintf(stderr, "  case %ld: %s\n", long(i), e.what());
    } catch (const std::exception& e) {
      t.failures.push_back("case " + std::to_string(i) + ": " + e.what());
    } catch (...) {
      t.failures.push_back("case " + std::to_string(i) + ": unknown exception");
    }
    ::alarm(0);
    g_input = nullptr;
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (took > t.slowest_s) t.slowest_s = took, t.slowest_case = i;
    ++t.cases;
  }
  std::fprintf(stderr,
               "fuzz %s: %ld cases (seed %lu): %ld ok, %ld errors (exit 2), %zu failures; "
               "slowest case %ld, %.3f s\n",
               target, long(t.cases), (unsigned long)seed, long(t.ok), long(t.errors),
               t.failures.size(), long(t.slowest_case), t.slowest_s);
  return t;
}

}  // namespace tessera::fuzz
