// The three token formats, each read from bytes this test lays out itself
// (from the documented layouts, not through our writers where avoidable),
// and the errors a bad file must produce.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "expect_error.h"
#include "tessera/core/error.h"
#include "tessera/data/llmc_shard.h"
#include "tessera/data/megatron_dataset.h"
#include "tessera/data/token_file.h"

namespace fs = std::filesystem;
using namespace tessera::data;
using Ids = std::vector<int32_t>;
using tessera::test::throws_error_with;

namespace {

class TokenFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_test_tokfiles_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

struct Bytes {
  std::string b;
  template <typename T>
  Bytes& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Bytes& raw(const char* s, size_t n) {
    b.append(s, n);
    return *this;
  }
  void write(const std::string& p) const { std::ofstream(p, std::ios::binary) << b; }
};

Ids iota_ids(int n, int mul, int mod) {
  Ids v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = (i * mul) % mod;
  return v;
}

}  // namespace

// ---- tessera format -------------------------------------------------------------

TEST_F(TokenFiles, TesseraWriteReadUint16AndUint32) {
  Ids small = iota_ids(1000, 7919, 50257);
  {
    TokenFileWriter w(path("a.tok"), 50257, 0x1234abcdULL, 50256);
    w.append(Ids(small.begin(), small.begin() + 400));
    w.end_document();
    w.append(Ids(small.begin() + 400, small.end()));
    w.end_document();
    w.close();
  }
  EXPECT_FALSE(fs::exists(path("a.tok.tmp")));
  EXPECT_EQ(fs::file_size(path("a.tok")), 64u + 2u * 1000u);  // uint16 for a 50257 vocabulary
  TokenFile f(path("a.tok"));
  EXPECT_EQ(f.size(), 1000);
  EXPECT_EQ(f.header().token_bytes, 2u);
  EXPECT_EQ(f.header().document_count, 2u);
  EXPECT_EQ(f.header().eot_id, 50256u);
  EXPECT_EQ(f.tokenizer_hash(), 0x1234abcdULL);
  EXPECT_EQ(f.vocab_hint(), 50257u);
  EXPECT_EQ(f.read(0, 1000), small);
  EXPECT_EQ(f.read(397, 5), Ids(small.begin() + 397, small.begin() + 402));

  Ids big = iota_ids(300, 104729, 100000);
  {
    TokenFileWriter w(path("b.tok"), 100000, 7);
    w.append(big);
    w.close();
  }
  EXPECT_EQ(fs::file_size(path("b.tok")), 64u + 4u * 300u);
  auto src = open_token_source(path("b.tok"));
  EXPECT_EQ(src->read(0, 300), big);
}

TEST_F(TokenFiles, TesseraHeaderLayoutIsAsDocumented) {
  {
    TokenFileWriter w(path("h.tok"), 300, 0x0102030405060708ULL, 299);
    w.append(Ids{5, 299, 0});
    w.close();
  }
  std::ifstream f(path("h.tok"), std::ios::binary);
  std::string b((std::istreambuf_iterator<char>(f)), {});
  ASSERT_EQ(b.size(), 64u + 6u);
  EXPECT_EQ(b.substr(0, 8), "TSRTOKEN");
  auto u32 = [&](size_t o) { uint32_t v; std::memcpy(&v, b.data() + o, 4); return v; };
  auto u64 = [&](size_t o) { uint64_t v; std::memcpy(&v, b.data() + o, 8); return v; };
  EXPECT_EQ(u32(8), 1u);
  EXPECT_EQ(u32(12), 2u);
  EXPECT_EQ(u64(16), 3u);
  EXPECT_EQ(u64(24), 0x0102030405060708ULL);
  EXPECT_EQ(u32(32), 300u);
  EXPECT_EQ(u32(36), 299u);
  uint16_t t[3];
  std::memcpy(t, b.data() + 64, 6);
  EXPECT_EQ(t[1], 299);
}

TEST_F(TokenFiles, TesseraErrors) {
  {
    TokenFileWriter w(path("ok.tok"), 100, 42);
    w.append(iota_ids(50, 3, 100));
    w.close();
  }
  std::ifstream in(path("ok.tok"), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), {});

  std::string bad = good;
  bad[0] = 'X';
  Bytes{bad}.write(path("magic.tok"));
  EXPECT_TRUE(
      throws_error_with([&] { TokenFile f(path("magic.tok")); }, {path("magic.tok"), "bad magic"}));

  bad = good;
  bad[8] = 9;  // version 9
  Bytes{bad}.write(path("version.tok"));
  EXPECT_TRUE(throws_error_with([&] { TokenFile f(path("version.tok")); },
                                {path("version.tok"), "version 9"}));

  Bytes{good.substr(0, good.size() - 3)}.write(path("short.tok"));
  EXPECT_TRUE(throws_error_with([&] { TokenFile f(path("short.tok")); },
                                {path("short.tok"), "truncated", "50 tokens"}));
  Bytes{good.substr(0, 20)}.write(path("stub.tok"));
  EXPECT_TRUE(
      throws_error_with([&] { TokenFile f(path("stub.tok")); }, {path("stub.tok"), "truncated"}));

  // an id >= the header's vocabulary: caught when read, naming the position
  bad = good;
  uint16_t big = 150;
  std::memcpy(bad.data() + 64 + 2 * 17, &big, 2);
  Bytes{bad}.write(path("id.tok"));
  TokenFile f(path("id.tok"));
  EXPECT_EQ(f.read(0, 17).size(), 17u);  // before the bad id: fine
  EXPECT_TRUE(throws_error_with([&] { f.read(10, 10); },
                                {path("id.tok"), "token 17", "id 150", "100 tokens"}));
  EXPECT_TRUE(throws_error_with([&] { f.validate_all(); }, {"token 17"}));
  EXPECT_TRUE(
      throws_error_with([&] { f.read(45, 10); }, {path("id.tok"), "[45, 55)", "50 tokens"}));

  // the writer refuses ids outside its vocabulary
  TokenFileWriter w(path("w.tok"), 10, 0);
  EXPECT_TRUE(throws_error_with([&] { w.append(Ids{3, 10}); }, {"token id 10"}));

  // tokenizer hash mismatch
  auto src = open_token_source(path("ok.tok"));
  EXPECT_NO_THROW(check_tokenizer_hash(*src, 42, "mine"));
  EXPECT_TRUE(throws_error_with([&] { check_tokenizer_hash(*src, 43, "vocab/"); },
                                {path("ok.tok"), "tokenizer mismatch", "vocab/"}));
  OpenOptions oo;
  oo.tokenizer_hash = 44;
  EXPECT_TRUE(
      throws_error_with([&] { open_token_source(path("ok.tok"), oo); }, {"tokenizer mismatch"}));
  oo = {};
  oo.vocab_size = 50;  // smaller than the file's 100
  EXPECT_TRUE(throws_error_with([&] { open_token_source(path("ok.tok"), oo); },
                                {"100 tokens", "in use has 50"}));
}

// ---- Megatron ---------------------------------------------------------------------

namespace {
// .idx as Megatron's _IndexWriter lays it out.
void write_idx(const std::string& p, uint8_t code, const std::vector<int32_t>& lengths, const std::vector<int64_t>& pointers,
               const std::vector<int64_t>& docs, uint64_t version = 1) {
  Bytes b;
  b.raw("MMIDIDX\0\0", 9).put<uint64_t>(version).put<uint8_t>(code).put<uint64_t>(lengths.size()).put<uint64_t>(docs.size());
  for (auto l : lengths) b.put(l);
  for (auto q : pointers) b.put(q);
  for (auto d : docs) b.put(d);
  b.write(p);
}
}  // namespace

TEST_F(TokenFiles, MegatronReadsSequencesInIndexOrder) {
  // int32 tokens; three sequences stored in .bin in the order 2, 0, 1 so the
  // pointers, not the file order, decide the stream.
  Ids s0{10, 11, 12}, s1{20}, s2{30, 31, 32, 33};
  Bytes bin;
  for (int32_t t : s2) bin.put(t);
  for (int32_t t : s0) bin.put(t);
  for (int32_t t : s1) bin.put(t);
  bin.write(path("m.bin"));
  write_idx(path("m.idx"), 4, {3, 1, 4}, {16, 28, 0}, {0, 2, 3});  // documents: [s0 s1], [s2]
  MegatronDataset ds(path("m"));
  EXPECT_EQ(ds.size(), 8);
  EXPECT_EQ(ds.num_sequences(), 3);
  EXPECT_EQ(ds.num_documents(), 2);
  EXPECT_EQ(ds.document_start(1), 4);
  EXPECT_EQ(ds.document_start(2), 8);
  EXPECT_EQ(ds.read(0, 8), (Ids{10, 11, 12, 20, 30, 31, 32, 33}));
  EXPECT_EQ(ds.read(2, 3), (Ids{12, 20, 30}));
  // detected by open_token_source from the prefix, the .bin or the .idx
  for (auto p : {path("m"), path("m.bin"), path("m.idx")}) EXPECT_EQ(open_token_source(p)->read(3, 2), (Ids{20, 30}));
}

TEST_F(TokenFiles, MegatronUint16AndWriterRoundTrip) {
  std::vector<Ids> docs{{1, 2, 3}, {}, {65000, 4}};
  write_megatron_dataset(path("w"), docs);
  EXPECT_EQ(fs::file_size(path("w.bin")), 2u * 5u);  // uint16: every id < 65500
  EXPECT_EQ(fs::file_size(path("w.idx")), 34u + 12u * 3u + 8u * 4u);
  MegatronDataset ds(path("w"));
  EXPECT_EQ(ds.dtype(), IntType::U16);
  EXPECT_EQ(ds.read(0, 5), (Ids{1, 2, 3, 65000, 4}));
  EXPECT_EQ(ds.num_documents(), 3);
  ds.set_vocab_limit(50257);
  EXPECT_TRUE(throws_error_with([&] { ds.read(0, 5); }, {path("w.bin"), "token 3", "id 65000"}));
}

TEST_F(TokenFiles, MegatronErrors) {
  Bytes bin;
  for (int16_t t : {1, 2, 3, 4}) bin.put(t);
  bin.write(path("e.bin"));
  write_idx(path("e.idx"), 3, {4}, {0}, {0, 1}, /*version=*/2);
  EXPECT_TRUE(
      throws_error_with([&] { MegatronDataset d(path("e")); }, {path("e.idx"), "version 2"}));
  write_idx(path("e.idx"), 7, {4}, {0}, {0, 1});
  EXPECT_TRUE(throws_error_with([&] { MegatronDataset d(path("e")); }, {"floating-point"}));
  write_idx(path("e.idx"), 3, {5}, {0}, {0, 1});  // 5 int16 = 10 bytes, .bin has 8
  EXPECT_TRUE(
      throws_error_with([&] { MegatronDataset d(path("e")); }, {path("e.bin"), "truncated"}));
  write_idx(path("e.idx"), 3, {4}, {0}, {0, 1});
  {
    std::ifstream in(path("e.idx"), std::ios::binary);
    std::string b((std::istreambuf_iterator<char>(in)), {});
    Bytes{b.substr(0, b.size() - 4)}.write(path("e.idx"));
  }
  EXPECT_TRUE(
      throws_error_with([&] { MegatronDataset d(path("e")); }, {path("e.idx"), "truncated"}));
  Bytes{"NOTANIDX" + std::string(40, '\0')}.write(path("e.idx"));
  EXPECT_TRUE(
      throws_error_with([&] { MegatronDataset d(path("e")); }, {path("e.idx"), "bad magic"}));
}

// ---- llm.c -------------------------------------------------------------------------

namespace {
void write_llmc(const std::string& p, int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& toks) {
  Bytes b;
  b.put(magic).put(version).put(count);
  for (int i = 3; i < 256; ++i) b.put<int32_t>(0);
  for (auto t : toks) b.put(t);
  b.write(p);
}
}  // namespace

TEST_F(TokenFiles, LlmcShard) {
  write_llmc(path("s.bin"), 20240520, 1, 5, {50256, 15496, 995, 0, 65535});
  LlmcShard s(path("s.bin"));
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(s.read(0, 5), (Ids{50256, 15496, 995, 0, 65535}));
  auto src = open_token_source(path("s.bin"));
  EXPECT_EQ(src->read(1, 2), (Ids{15496, 995}));
  src->set_vocab_limit(50257);
  EXPECT_TRUE(
      throws_error_with([&] { src->read(0, 5); }, {path("s.bin"), "token 4", "id 65535", "50257"}));

  // our writer gives the same bytes as the hand-made header
  write_llmc_shard(path("w.bin"), Ids{50256, 15496, 995, 0, 65535});
  std::ifstream a(path("s.bin"), std::ios::binary), b(path("w.bin"), std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(a)), {}), std::string((std::istreambuf_iterator<char>(b)), {}));
}

TEST_F(TokenFiles, LlmcErrors) {
  write_llmc(path("v.bin"), 20240520, 2, 2, {1, 2});
  EXPECT_TRUE(throws_error_with([&] { LlmcShard s(path("v.bin")); }, {path("v.bin"), "version 2"}));
  write_llmc(path("t.bin"), 20240520, 1, 10, {1, 2, 3});
  EXPECT_TRUE(throws_error_with([&] { LlmcShard s(path("t.bin")); },
                                {path("t.bin"), "truncated", "10 tokens"}));
  write_llmc(path("m.bin"), 12345, 1, 1, {1});
  EXPECT_TRUE(throws_error_with([&] { LlmcShard s(path("m.bin")); }, {path("m.bin"), "bad magic"}));
  EXPECT_TRUE(throws_error_with([&] { open_token_source(path("m.bin")); },
                                {path("m.bin"), "unknown token file format"}));
  EXPECT_TRUE(throws_error_with([&] { open_token_source(path("nope.bin")); }, {path("nope.bin")}));
}

// ---- several files as one ---------------------------------------------------------------

TEST_F(TokenFiles, ConcatAcrossFormats) {
  write_llmc(path("a.bin"), 20240520, 1, 3, {1, 2, 3});
  {
    TokenFileWriter w(path("b.tok"), 100, 0);
    w.append(Ids{4, 5});
    w.close();
  }
  write_megatron_dataset(path("c"), {{6, 7}, {8}});
  auto src = open_token_sources({path("a.bin"), path("b.tok"), path("c")});
  EXPECT_EQ(src->size(), 8);
  EXPECT_EQ(src->read(0, 8), (Ids{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(src->read(2, 4), (Ids{3, 4, 5, 6}));
  // The largest part's: the llm.c GPT-2 shard names GPT-2's 50257 tokens.
  EXPECT_EQ(src->vocab_hint(), 50257u);
}
