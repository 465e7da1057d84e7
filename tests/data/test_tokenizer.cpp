// Byte-level BPE: GPT-2 file compatibility, merges by rank, round trips,
// training, save/load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "expect_error.h"
#include "tessera/core/error.h"
#include "tessera/data/bpe_train.h"
#include "tessera/data/byte_unicode.h"
#include "tessera/data/tokenizer.h"

namespace fs = std::filesystem;
using namespace tessera::data;
using Ids = std::vector<int32_t>;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tessera_test_tok_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// The first 8 merges of GPT-2's merges.txt, spelled as OpenAI/Hugging Face
// files spell them; GPT-2's vocab.json gives their results ids 256..263.
const char* kGpt2Merges[] = {"Ġ t", "Ġ a", "h e", "i n", "r e", "o n", "Ġt he", "e r"};

// A vocab.json + merges.txt that is a prefix of GPT-2's: the 256 byte tokens
// at GPT-2's ids, the 8 merges, and <|endoftext|> at 264.
void write_gpt2_prefix(const fs::path& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  const auto& bu = byte_unicode();
  for (int id = 0; id < 256; ++id) vocab[bytes_to_gpt2(std::string(1, char(bu.order[size_t(id)])))] = id;
  int id = 256;
  for (const char* m : kGpt2Merges) {
    std::string s(m);
    vocab[s.substr(0, s.find(' ')) + s.substr(s.find(' ') + 1)] = id++;
  }
  vocab["<|endoftext|>"] = 264;
  std::ofstream(dir / "vocab.json") << vocab.dump();  // keys sorted, not by id: order must not matter
  std::ofstream m(dir / "merges.txt");
  m << "#version: 0.2\n";
  for (const char* s : kGpt2Merges) m << s << "\n";
}

Tokenizer small_tokenizer() {
  // Trained on a fixed text, enough merges for multi-token words.
  std::string text;
  for (int i = 0; i < 20; ++i) text += "the quick brown fox jumps over the lazy dog. The dog's 42 naps! ";
  WordCounts wc;
  count_words(text, {std::string(kEndOfText)}, wc);
  BpeTrainOptions opts;
  opts.vocab_size = 300;
  return train_bpe(wc, opts);
}

}  // namespace

TEST(ByteUnicode, MatchesGpt2Table) {
  const auto& bu = byte_unicode();
  EXPECT_EQ(bu.byte_to_cp[' '], 0x120u);   // 'Ġ'
  EXPECT_EQ(bu.byte_to_cp['\n'], 0x10Au);  // 'Ċ'
  EXPECT_EQ(bu.byte_to_cp['!'], uint32_t('!'));
  EXPECT_EQ(bu.byte_to_cp[0x00], 0x100u);
  EXPECT_EQ(bu.byte_to_cp[0xAD], 0x143u);  // the last non-printable byte
  // GPT-2's ids of single bytes: '!' 0, 'a' 64, '\n' 198, ' ' 220
  EXPECT_EQ(bu.order[0], '!');
  EXPECT_EQ(bu.order[64], 'a');
  EXPECT_EQ(bu.order[198], '\n');
  EXPECT_EQ(bu.order[220], ' ');
  for (int b = 0; b < 256; ++b) EXPECT_EQ(bu.cp_to_byte(bu.byte_to_cp[size_t(b)]), b);
}

TEST(Tokenizer, LoadsGpt2FilesWithGpt2Ids) {
  fs::path dir = temp_dir("gpt2");
  write_gpt2_prefix(dir);
  Tokenizer tok = Tokenizer::load(dir.string());
  EXPECT_EQ(tok.vocab_size(), 265);
  EXPECT_EQ(tok.num_merges(), 8);
  EXPECT_EQ(tok.eot_id(), 264);
  EXPECT_TRUE(tok.is_special(264));
  EXPECT_FALSE(tok.is_special(262));
  EXPECT_EQ(tok.encode(" the"), (Ids{262}));
  EXPECT_EQ(tok.encode("\n"), (Ids{198}));
  // " there": Ġt(0) -> [Ġt h e r e], he(2) -> [Ġt he r e], re(4) -> [Ġt he re],
  // Ġthe(6) -> [Ġthe re]; er(7) never applies.
  EXPECT_EQ(tok.encode("in the there"), (Ids{259, 262, 262, 260}));
  EXPECT_EQ(tok.encode("<|endoftext|>a"), (Ids{264, 64}));
  EXPECT_EQ(tok.encode("<|endoftext|>", /*specials=*/false).size(), 13u);  // one byte token per character
  fs::remove_all(dir);
}

TEST(Tokenizer, MergesAllOccurrencesOfTheLowestRankFirst) {
  // merges: a+a -> "aa" (256), aa+aa -> "aaaa" (257)
  const int32_t a = byte_unicode().order[64] == 'a' ? 64 : -1;
  Tokenizer tok = Tokenizer::from_merges({{a, a}, {256, 256}}, {});
  // 7 a's: aa aa aa a -> aaaa aa a
  EXPECT_EQ(tok.encode("aaaaaaa"), (Ids{257, 256, a}));
  // 1003 a's (the long-word path): 501 aa + a -> 250 aaaa + aa + a
  Ids want(250, 257);
  want.push_back(256);
  want.push_back(a);
  EXPECT_EQ(tok.encode(std::string(1003, 'a')), want);
}

// encoder.py's bpe() written plainly over token ids, as the reference.
static Ids reference_bpe(const Tokenizer& tok, const std::string& word) {
  std::map<std::pair<int32_t, int32_t>, int32_t> rank;
  for (int32_t r = 0; r < tok.num_merges(); ++r) rank.emplace(tok.merge(r), r);
  Ids parts;
  for (unsigned char c : word) parts.push_back(tok.byte_id(c));
  while (parts.size() > 1) {
    int32_t best = INT32_MAX;
    std::pair<int32_t, int32_t> bigram;
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      auto it = rank.find({parts[k], parts[k + 1]});
      if (it != rank.end() && it->second < best) best = it->second, bigram = it->first;
    }
    if (best == INT32_MAX) break;
    Ids next;
    for (size_t k = 0; k < parts.size();) {
      if (k + 1 < parts.size() && parts[k] == bigram.first && parts[k + 1] == bigram.second) {
        next.push_back(256 + best);  // trained vocab: merge r makes id 256 + r
        k += 2;
      } else {
        next.push_back(parts[k++]);
      }
    }
    parts = next;
  }
  return parts;
}

TEST(Tokenizer, LongWordsMatchTheReferenceAlgorithm) {
  // Words over 64 bytes take the heap-based path; it must agree with
  // encoder.py's loop.
  Tokenizer tok = small_tokenizer();
  std::mt19937 rng(5);
  const std::string letters = "thequickbrownfoxjumpsoverlazydog";
  for (int iter = 0; iter < 50; ++iter) {
    std::string word(40 + rng() % 300, 'x');
    for (auto& c : word) c = letters[rng() % letters.size()];
    ASSERT_EQ(tok.encode(word), reference_bpe(tok, word)) << word;
  }
}

TEST(Tokenizer, RoundTripsRandomBytesIncludingInvalidUtf8) {
  Tokenizer tok = small_tokenizer();
  std::mt19937 rng(123);
  EncodeCache cache;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s) {
      // mix ASCII text, raw high bytes, and valid multi-byte sequences
      uint32_t r = rng() % 10;
      c = r < 5 ? "the og 4!'\n"[rng() % 11] : char(rng() & 0xFF);
    }
    if (iter % 7 == 0) s += "é中😀<|endoftext|>";
    Ids ids;
    tok.encode(s, ids, cache, /*specials=*/iter % 2 == 0);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
    ASSERT_EQ(tok.decode(ids), s) << "iteration " << iter;
  }
}

TEST(Tokenizer, SpecialTokensSplitTheText) {
  Tokenizer tok = small_tokenizer();
  const int32_t eot = tok.eot_id();
  ASSERT_EQ(eot, tok.vocab_size() - 1);
  Ids a = tok.encode("the dog");
  Ids b = tok.encode(" lazy");
  Ids joined = a;
  joined.push_back(eot);
  joined.insert(joined.end(), b.begin(), b.end());
  EXPECT_EQ(tok.encode("the dog<|endoftext|> lazy"), joined);
  EXPECT_THROW(tok.decode(Ids{tok.vocab_size()}), tessera::Error);
}

TEST(Tokenizer, ParallelEncodeEqualsSerial) {
  Tokenizer tok = small_tokenizer();
  std::string text;
  std::mt19937 rng(7);
  const char* words[] = {"the", "quick", "brown", "fox", "42", "dog's", "naps!", "\n\n", "  ", "é", "\xFF"};
  while (text.size() < (3u << 20)) {
    text += words[rng() % 11];
    text += ' ';
  }
  Ids serial = tok.encode(text);
  std::vector<EncodeCache> caches;
  Ids parallel;
  tok.encode_parallel(text, parallel, caches);
  EXPECT_EQ(parallel.size(), serial.size());
  EXPECT_TRUE(parallel == serial);
  EXPECT_EQ(tok.decode(parallel), text);
}

TEST(BpeTrain, FirstMergesWorkedOutByHand) {
  // Words of "xy xy yz yz": "xy" x1, " xy" x1, " yz" x2.
  // Pair counts: (x,y)=2, (' ',x)=1, (' ',y)=2, (y,z)=2. Ties break on the
  // smaller (left bytes, right bytes); ' ' < 'x' < 'y', so:
  //   1. ' '+'y'  -> " y"   pairs now (x,y)=2, (' ',x)=1, (" y",z)=2
  //   2. " y"+'z' -> " yz"  (" y" < "x")
  //   3. 'x'+'y'  -> "xy"
  // then (' ',"xy") occurs once, below the minimum count of 2: stop.
  WordCounts wc;
  count_words("xy xy yz yz", {std::string(kEndOfText)}, wc);
  EXPECT_EQ(wc.size(), 3u);
  EXPECT_EQ(wc.at(" yz"), 2);
  BpeTrainOptions opts;
  opts.vocab_size = 1000;
  Tokenizer tok = train_bpe(wc, opts);
  ASSERT_EQ(tok.num_merges(), 3);
  EXPECT_EQ(tok.vocab_size(), 256 + 3 + 1);
  EXPECT_EQ(tok.token_bytes(256), " y");
  EXPECT_EQ(tok.token_bytes(257), " yz");
  EXPECT_EQ(tok.token_bytes(258), "xy");
  EXPECT_EQ(tok.token_bytes(259), "<|endoftext|>");
  EXPECT_EQ(tok.merge(1), (std::pair<int32_t, int32_t>{256, tok.byte_id('z')}));
  EXPECT_EQ(tok.encode("xy yz xy"), (Ids{258, 257, tok.byte_id(' '), 258}));

  // With min count 1 the fourth merge is ' '+"xy"; a vocab size caps it.
  opts.min_pair_count = 1;
  opts.vocab_size = 256 + 4 + 1;
  Tokenizer tok4 = train_bpe(wc, opts);
  ASSERT_EQ(tok4.num_merges(), 4);
  EXPECT_EQ(tok4.token_bytes(259), " xy");
  opts.vocab_size = 256 + 2 + 1;
  EXPECT_EQ(train_bpe(wc, opts).num_merges(), 2);
}

TEST(BpeTrain, CountsChangeIncrementallyAcrossOverlaps) {
  // "aaaa" x3, "aaa" x1: (a,a) = 3*3 + 2 = 11 -> "aa"; the words become
  // [aa aa] x3 and [aa a] x1: (aa,aa)=3, (aa,a)=1 -> "aaaa".
  WordCounts wc{{"aaaa", 3}, {"aaa", 1}};
  BpeTrainOptions opts;
  opts.vocab_size = 300;
  Tokenizer tok = train_bpe(wc, opts);
  ASSERT_EQ(tok.num_merges(), 2);
  EXPECT_EQ(tok.token_bytes(256), "aa");
  EXPECT_EQ(tok.token_bytes(257), "aaaa");
}

TEST(Tokenizer, SaveThenLoadIsIdentical) {
  Tokenizer tok = small_tokenizer();
  fs::path dir = temp_dir("save");
  tok.save(dir.string());
  {
    std::ifstream m(dir / "merges.txt");
    std::string first;
    std::getline(m, first);
    EXPECT_EQ(first, "#version: 0.2");
  }
  Tokenizer back = Tokenizer::load(dir.string());
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  EXPECT_EQ(back.num_merges(), tok.num_merges());
  EXPECT_EQ(back.hash(), tok.hash());
  EXPECT_EQ(back.eot_id(), tok.eot_id());
  for (int32_t id = 0; id < tok.vocab_size(); ++id) ASSERT_EQ(back.token_bytes(id), tok.token_bytes(id));
  for (int32_t r = 0; r < tok.num_merges(); ++r) ASSERT_EQ(back.merge(r), tok.merge(r));
  // A different vocabulary hashes differently.
  EXPECT_NE(Tokenizer::from_merges({{64, 65}}, {}).hash(), Tokenizer::from_merges({{65, 64}}, {}).hash());
  fs::remove_all(dir);
}

TEST(Tokenizer, BadFilesGiveClearErrors) {
  fs::path dir = temp_dir("bad");
  write_gpt2_prefix(dir);
  std::ofstream(dir / "merges.txt", std::ios::app) << "q zz\n";
  EXPECT_TRUE(tessera::test::throws_error_with([&] { Tokenizer::load(dir.string()); },
                                               {"merges.txt:10"}));
  std::ofstream(dir / "vocab.json") << "{not json";
  EXPECT_THROW(Tokenizer::load(dir.string()), tessera::Error);
  EXPECT_THROW(Tokenizer::load((dir / "missing").string()), tessera::Error);
  fs::remove_all(dir);
}
