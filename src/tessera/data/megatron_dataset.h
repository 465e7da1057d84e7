// Megatron-LM's indexed dataset (MMapIndexedDataset): PREFIX.bin holds the
// token ids of every sequence back to back, with no header; PREFIX.idx says
// where they are:
//
//   offset  size        field
//   0       9           magic "MMIDIDX\0\0"
//   9       8           version, uint64 = 1
//   17      1           dtype code, uint8: 1 uint8, 2 int8, 3 int16, 4 int32,
//                       5 int64, 6 float64, 7 float32, 8 uint16
//   18      8           sequence count S, uint64
//   26      8           document count D, uint64 (= documents + 1)
//   34      4*S         sequence lengths, int32 (tokens)
//   34+4S   8*S         sequence pointers, int64 (byte offsets into .bin)
//   34+12S  8*D         document indices, int64: sequence index where each
//                       document starts, from 0 to S
//   (then, in multimodal datasets only, S int8 sequence modes: ignored)
//
// The token stream is the sequences in order; documents are read back as
// token offsets for callers that want boundaries.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/data/mapped_file.h"
#include "tessera/data/token_source.h"

namespace tessera::data {

inline constexpr char kMegatronIdxMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};

class MegatronDataset final : public TokenSource {
 public:
  // prefix: the path without .bin/.idx.
  explicit MegatronDataset(const std::string& prefix);
  std::string describe() const override;

  int64_t num_sequences() const { return int64_t(seq_start_.size()) - 1; }
  int64_t num_documents() const { return int64_t(doc_start_.size()) - 1; }
  // Token offset where document d starts; document_start(num_documents()) == size().
  int64_t document_start(int64_t d) const { return doc_start_.at(size_t(d)); }
  IntType dtype() const { return dtype_; }

 private:
  MegatronDataset(const std::string& prefix, MappedFile idx, MappedFile bin);
  void read_raw(int64_t begin, int64_t count, int32_t* out) const override;
  void check_unchanged() const override { bin_.check_unchanged(); }

  MappedFile bin_;                  // (bytes,) token ids of all sequences
  IntType dtype_ = IntType::U16;
  std::vector<int64_t> seq_start_;  // (S + 1,) token offset of each sequence, then the total
  std::vector<int64_t> seq_ptr_;    // (S,) byte offset of each sequence in .bin
  std::vector<int64_t> doc_start_;  // (D,) token offset of each document boundary
};

// Writes PREFIX.bin + PREFIX.idx (dtype uint16 when every id < 65500, as
// Megatron chooses, else int32): one sequence per document. For tests and
// for exporting tessera token data to Megatron.
void write_megatron_dataset(const std::string& prefix, const std::vector<std::vector<int32_t>>& documents);

}  // namespace tessera::data
