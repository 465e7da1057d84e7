#include "tessera/train/tensorboard_writer.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "tessera/ckpt/crc32c.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {

uint32_t masked_crc(const std::string& bytes) {
  const uint32_t crc = ckpt::crc32c(bytes.data(), bytes.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

template <typename T>
void put_le(std::string& out, T v) {  // little-endian, as x86 stores it
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

// Protobuf field keys: (field number << 3) | wire type.
enum Wire : uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };
void put_key(std::string& out, int field, Wire w) { put_varint(out, uint64_t(field) << 3 | w); }
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

double unix_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string event(double wall_time, int64_t step) {
  std::string e;
  put_key(e, 1, kFixed64);
  put_le(e, wall_time);
  put_key(e, 2, kVarint);
  put_varint(e, uint64_t(step));
  return e;
}

}  // namespace

std::string tfrecord(const std::string& data) {
  std::string len;
  put_le(len, uint64_t(data.size()));
  std::string r = len;
  put_le(r, masked_crc(len));
  r += data;
  put_le(r, masked_crc(data));
  return r;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TESSERA_CHECK(std::filesystem::is_directory(dir),
                "--tensorboard-dir {}: cannot create the directory{}", dir,
                ec ? ": " + ec.message() : "");
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  path_ = fmt::format("{}/events.out.tfevents.{}.{}.{}", dir, std::time(nullptr), host, getpid());
  file_ = std::fopen(path_.c_str(), "wb");
  TESSERA_CHECK(file_ != nullptr, "--tensorboard-dir {}: cannot write {}: {}", dir, path_,
                std::strerror(errno));
  std::string e = event(unix_seconds(), 0);
  put_bytes(e, 3, "brain.Event:2");
  write_record(e);
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::write_record(const std::string& data) {
  const std::string r = tfrecord(data);
  const bool ok = std::fwrite(r.data(), 1, r.size(), file_) == r.size() && std::fflush(file_) == 0;
  TESSERA_CHECK(ok, "--tensorboard-dir: writing {} failed: {}", path_, std::strerror(errno));
}

void TensorBoardWriter::write_scalars(int64_t step,
                                      const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_key(v, 2, kFixed32);
    put_le(v, value);
    put_bytes(summary, 1, v);
  }
  std::string e = event(unix_seconds(), step);
  put_bytes(e, 5, summary);
  write_record(e);
}

void TensorBoardWriter::write_step(const StepStats& s) {
  std::vector<std::pair<std::string, float>> v = {
      {"lm loss", s.loss},
      {"learning-rate", s.lr},
      {"grad-norm", s.grad_norm},
      {"tokens-per-second", float(s.tokens_per_second())},
      {"iteration-time", float(s.seconds)},
  };
  if (s.peak_tflops > 0) v.push_back({"mfu", float(s.mfu())});
  if (s.loss_scale > 0) {
    v.push_back({"loss-scale", s.loss_scale});
    v.push_back({"skipped-iterations", float(s.skipped_steps)});
  }
  if (s.valid_loss >= 0) v.push_back({"lm loss validation", s.valid_loss});
  write_scalars(s.step, v);
}

}  // namespace tessera
