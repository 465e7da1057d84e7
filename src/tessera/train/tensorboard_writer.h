// TensorBoard event files (Megatron-LM's --tensorboard-dir), written by hand:
// a TFRecord stream of tensorflow.Event protobufs, each step's scalars
// (loss, lr, grad norm, loss scale, tokens/s, MFU, validation loss; the
// trainer adds the memory per rank once)
// as Summary values. No TensorFlow or protobuf library is needed to write
// the few fields TensorBoard reads:
//
//   record: uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
//
// masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 over CRC32C.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tessera/train/step_stats.h"

namespace tessera {

class TensorBoardWriter {
 public:
  // Creates `dir` and a new events.out.tfevents.<seconds>.<host>.<pid> file
  // in it, starting with the file_version event. Throws tessera::Error
  // naming --tensorboard-dir when it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One event of scalars at `step`, stamped with the Unix time now and
  // flushed (a crashed run keeps its curve). Throws on a write error (disk
  // full), naming the file.
  void write_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
  // The scalars TensorBoard shows for a training step (names as Megatron's).
  void write_step(const StepStats& s);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// What the writer encodes, exposed for tests: one TFRecord around `data`.
std::string tfrecord(const std::string& data);

}  // namespace tessera
