// `tessera tokenize`: learn a byte-level BPE vocabulary, turn text into a
// token file for training, and back.
#include <fmt/core.h>
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "tessera/cli/commands.h"
#include "tessera/cli/flag_checks.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/data/bpe_train.h"
#include "tessera/data/token_file.h"
#include "tessera/data/tokenizer.h"

namespace tessera::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A bar redrawn in place on a terminal; on a pipe or log, one line per 10%.
class Progress {
 public:
  Progress(std::string label, uint64_t total) : label_(std::move(label)), total_(total), tty_(isatty(2)), t0_(Clock::now()) {}
  void update(uint64_t done) {
    const double frac = total_ ? double(done) / double(total_) : 1.0;
    const double secs = seconds_since(t0_);
    const double mbs = secs > 0 ? double(done) / 1e6 / secs : 0.0;
    if (tty_) {
      constexpr int kWidth = 30;
      int fill = int(frac * kWidth + 0.5);
      double eta = (frac > 0 && frac < 1) ? secs * (1 - frac) / frac : 0;
      fmt::print(stderr, "\r{} [{:<{}}] {:5.1f}%  {:.1f}/{:.1f} MB  {:.1f} MB/s  ETA {:.0f}s ", label_, std::string(size_t(fill), '#'),
                 kWidth, 100 * frac, double(done) / 1e6, double(total_) / 1e6, mbs, eta);
      std::fflush(stderr);
    } else {
      int decile = int(frac * 10);
      if (decile > last_decile_) {
        last_decile_ = decile;
        fmt::print(stderr, "{}: {:.0f}% ({:.1f} of {:.1f} MB, {:.1f} MB/s)\n", label_, 100 * frac, double(done) / 1e6,
                   double(total_) / 1e6, mbs);
      }
    }
  }
  void finish() {
    if (tty_) fmt::print(stderr, "\n");
  }

 private:
  std::string label_;
  uint64_t total_;
  bool tty_;
  Clock::time_point t0_;
  int last_decile_ = 0;
};

uint64_t total_bytes(const std::vector<std::string>& files) {
  uint64_t n = 0;
  for (const auto& f : files) {
    std::error_code ec;
    auto s = fs::file_size(f, ec);
    TESSERA_CHECK(!ec, "cannot read {}: {}", f, ec.message());
    n += s;
  }
  return n;
}

void register_train_cmd(CLI::App& tok) {
  auto* sub = tok.add_subcommand("train", "learn a byte-level BPE vocabulary (GPT-2 style) from text files");
  struct Opts {
    std::vector<std::string> inputs;
    int32_t vocab_size = 0;
    std::string output;
    int64_t min_count = 2;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("--input", o->inputs, "text files to learn from")->required()->expected(1, -1);
  sub->add_option("--vocab-size", o->vocab_size, "tokens in the vocabulary, including the 256 bytes and <|endoftext|>")
      ->required();
  sub->add_option("--output", o->output, "directory to write vocab.json and merges.txt to")->required();
  sub->add_option("--min-count", o->min_count, "stop before merging a pair seen fewer times")->capture_default_str();
  sub->callback([o] {
    TESSERA_CHECK(o->min_count >= 1, "--min-count must be >= 1 (got {})", o->min_count);
    auto t0 = Clock::now();
    data::BpeTrainOptions opts;
    opts.vocab_size = o->vocab_size;
    opts.min_pair_count = o->min_count;
    const bool tty = isatty(2);
    opts.progress = [tty](int32_t done, int32_t want) {
      if (tty) fmt::print(stderr, "\rmerges {}/{} ", done, want);
      else if (done == want || done % 5000 == 0) fmt::print(stderr, "merges {}/{}\n", done, want);
    };
    fmt::print("counting words in {} file(s), {:.1f} MB\n", o->inputs.size(), double(total_bytes(o->inputs)) / 1e6);
    std::fflush(stdout);  // before the progress lines on stderr
    data::Tokenizer tok = data::train_bpe_files(o->inputs, opts);
    if (tty) fmt::print(stderr, "\n");
    tok.save(o->output);
    fmt::print("wrote {}/vocab.json and merges.txt: {} tokens ({} merges), hash {:016x}, in {:.1f} s\n", o->output,
               tok.vocab_size(), tok.num_merges(), tok.hash(), seconds_since(t0));
    if (tok.vocab_size() < o->vocab_size)
      fmt::print("note: stopped at {} tokens, not {}: no pair occurs {} times any more (more text, or --min-count 1)\n",
                 tok.vocab_size(), o->vocab_size, o->min_count);
  });
}

void register_encode_cmd(CLI::App& tok) {
  auto* sub = tok.add_subcommand("encode", "encode text files into one token file for `tessera train`");
  struct Opts {
    std::string vocab;
    std::vector<std::string> inputs;
    std::string output;
    std::string eot = "before";
    bool no_specials = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("--vocab", o->vocab, "directory holding vocab.json and merges.txt")->required();
  sub->add_option("--input", o->inputs, "text files; each is one document")->required()->expected(1, -1);
  sub->add_option("--output", o->output, "token file to write")->required();
  sub->add_option("--eot", o->eot, "where <|endoftext|> goes around each document: before (GPT-2, llm.c), after, none")
      ->check(CLI::IsMember({"before", "after", "none"}))
      ->capture_default_str();
  sub->add_flag("--no-specials", o->no_specials, "encode '<|endoftext|>' in the text as plain text, not as the special token");
  sub->add_option("--threads", o->threads, "threads (default: OpenMP's)");
  sub->callback([o] {
    check_threads(o->threads);
    auto t0 = Clock::now();
    if (o->threads > 0) omp_set_num_threads(o->threads);
    data::Tokenizer tok = data::Tokenizer::load(o->vocab);
    const int32_t eot = tok.eot_id();
    TESSERA_CHECK(o->eot == "none" || eot >= 0, "{} has no <|endoftext|> token; pass --eot none", o->vocab);
    const uint64_t total = total_bytes(o->inputs);
    data::TokenFileWriter writer(o->output, uint32_t(tok.vocab_size()), tok.hash(), eot);
    std::vector<data::EncodeCache> caches;
    std::vector<int32_t> ids;  // (tokens of one block,)
    Progress bar("encode", total);
    uint64_t done = 0;
    // Blocks of 16 MB, cut where pre-tokenization splits anyway, so memory
    // stays flat and the ids equal encoding each file whole.
    constexpr size_t kBlock = size_t(16) << 20;
    std::string buf;
    for (const auto& path : o->inputs) {
      std::ifstream f(path, std::ios::binary);
      TESSERA_CHECK(f.good(), "cannot open {}", path);
      if (o->eot == "before") writer.append(std::span<const int32_t>(&eot, 1));
      buf.clear();
      bool eof = false;
      while (!eof) {
        size_t have = buf.size();
        buf.resize(have + kBlock);
        f.read(buf.data() + have, std::streamsize(kBlock));
        buf.resize(have + size_t(f.gcount()));
        eof = !f;
        TESSERA_CHECK(eof ? f.eof() : true, "error reading {}", path);
        size_t cut = buf.size();
        if (!eof) {
          cut = data::find_safe_cut(buf, buf.size() > (size_t(1) << 20) ? buf.size() - (size_t(1) << 20) : 0);
          if (cut == std::string::npos) continue;  // no safe cut near the end yet: read more
        }
        ids.clear();
        tok.encode_parallel(std::string_view(buf).substr(0, cut), ids, caches, !o->no_specials);
        writer.append(ids);
        done += cut;
        buf.erase(0, cut);
        bar.update(done);
      }
      if (o->eot == "after") writer.append(std::span<const int32_t>(&eot, 1));
      writer.end_document();
    }
    bar.finish();
    writer.close();
    const double secs = seconds_since(t0);
    fmt::print("wrote {}: {} tokens (uint{}) from {:.1f} MB in {:.2f} s ({:.1f} MB/s, {:.2f} bytes/token)\n", o->output,
               writer.count(), data::token_bytes_for_vocab(uint32_t(tok.vocab_size())) * 8, double(total) / 1e6, secs,
               double(total) / 1e6 / secs, writer.count() ? double(total) / double(writer.count()) : 0.0);
  });
}

void register_decode_cmd(CLI::App& tok) {
  auto* sub = tok.add_subcommand("decode", "decode token data (tessera, Megatron or llm.c) back to text");
  struct Opts {
    std::string vocab, input, output;
    int64_t start = 0, count = -1;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("--vocab", o->vocab, "directory holding vocab.json and merges.txt")->required();
  sub->add_option("--input", o->input, "token file")->required();
  sub->add_option("--output", o->output, "text file to write (default: standard output)");
  sub->add_option("--start", o->start, "first token")->capture_default_str();
  CLI::Option* count = sub->add_option("--count", o->count, "tokens to decode (default: to the end)");
  sub->callback([o, count] {
    TESSERA_CHECK(o->start >= 0, "--start must be >= 0 (got {})", o->start);
    TESSERA_CHECK(count->count() == 0 || o->count >= 0, "--count must be >= 0 (got {})", o->count);
    data::Tokenizer tok = data::Tokenizer::load(o->vocab);
    auto src = data::open_token_source(o->input);
    TESSERA_CHECK(o->start <= src->size(), "--start {} is past the end of {} ({} tokens)", o->start,
                  o->input, src->size());
    data::check_tokenizer_hash(*src, tok.hash(), o->vocab);
    TESSERA_CHECK(src->vocab_hint() <= uint32_t(tok.vocab_size()), "{}: the file's vocabulary has {} tokens, {} has {}",
                  o->input, src->vocab_hint(), o->vocab, tok.vocab_size());
    src->set_vocab_limit(uint32_t(tok.vocab_size()));
    // start <= size, so size - start cannot wrap (start + count could).
    const int64_t end =
        o->count < 0 ? src->size() : o->start + std::min(src->size() - o->start, o->count);
    // Default standard output; a named file through core/output_file.h.
    std::optional<OutputFile> out;
    if (!o->output.empty()) out.emplace(o->output, "--output");
    std::vector<int32_t> ids;
    for (int64_t b = o->start; b < end; b += 1 << 20) {
      ids = src->read(b, std::min<int64_t>(1 << 20, end - b));
      std::string text = tok.decode(ids);
      if (out) out->write(text);
      else std::fwrite(text.data(), 1, text.size(), stdout);
    }
    if (out) out->commit();
  });
}

void register_info_cmd(CLI::App& tok) {
  auto* sub = tok.add_subcommand("info", "describe token files (format, count, dtype, vocabulary, tokenizer hash)");
  auto inputs = std::make_shared<std::vector<std::string>>();
  sub->add_option("files", *inputs, "token files")->required()->expected(1, -1);
  sub->callback([inputs] {
    for (const auto& p : *inputs) fmt::print("{}\n", data::open_token_source(p)->describe());
  });
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto* tok = app.add_subcommand("tokenize", "byte-level BPE: learn a vocabulary, encode text into token files, decode");
  tok->require_subcommand(1);
  register_train_cmd(*tok);
  register_encode_cmd(*tok);
  register_decode_cmd(*tok);
  register_info_cmd(*tok);
}

}  // namespace tessera::cli
