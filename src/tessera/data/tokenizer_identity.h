// Tokenizer identity: which tokenizer made a token file, a model, a
// --vocab-file. A token id means text only under the tokenizer that made it,
// so parties with different tokenizers must never meet: the files of a
// blend, training and validation data, a model and the data it is trained
// on or evaluated on, a model and the tokenizer that decodes its output.
// Every such check goes through same_tokenizer(), so each refusal is the
// same one line naming both sides.
//
// A hash is Tokenizer::hash(). 0 means unknown (Megatron and llm.c files
// record none, nor do checkpoints that predate the recorded hash and carry
// no tokenizer files) and agrees with anything.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::data {

// One side of a comparison.
struct TokenizerId {
  std::string name;   // what the message calls it: "b.tok", "--vocab-file DIR/vocab.json", "the model CK"
  uint64_t hash = 0;  // Tokenizer::hash(); 0: unknown
};

// Byte-level text ("bytes": token = byte value) as a hash. No BPE
// tokenizer's ids are raw byte values (GPT-2 reorders the bytes), so it
// must differ from every Tokenizer::hash(); a fixed odd constant does, but
// for a 2^-64 chance.
inline constexpr uint64_t kBytesTokenizerHash = 0x62797465732d3031ull;  // "bytes-01"

// Throws tessera::Error (one line naming both sides and their hashes)
// unless every known hash in `ids` equals the first known one. Returns that
// first known id ({} when none is known).
TokenizerId same_tokenizer(const std::vector<TokenizerId>& ids);

// The hash of a tokenizer spec as checkpoints and --tokenizer name one:
// "bytes", a directory with vocab.json + merges.txt (loaded and hashed),
// or anything else (e.g. "", a directory that is gone): 0.
uint64_t tokenizer_spec_hash(const std::string& spec);

// A model's tokenizer: the hash its checkpoint records, else the hash of
// its tokenizer spec (above). `name` says which model, for the message.
TokenizerId model_tokenizer(std::string name, const std::string& spec, uint64_t recorded_hash);

}  // namespace tessera::data
