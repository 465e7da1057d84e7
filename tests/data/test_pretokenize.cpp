// GPT-2 pre-tokenization: known splits. Each expectation is what GPT-2's
// pattern gives under Python's `regex` module (worked out from the pattern's
// alternation order and checked against it).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/data/pretokenize.h"
#include "tessera/data/unicode_tables.h"

using tessera::data::pretokenize;
using Pieces = std::vector<std::string>;

static Pieces split(std::string_view s) {
  Pieces out;
  for (auto p : pretokenize(s)) out.emplace_back(p);
  return out;
}

TEST(Pretokenize, ContractionsSpacesDigitsPunctuation) {
  EXPECT_EQ(split("Hello world's 123  !!"), (Pieces{"Hello", " world", "'s", " 123", " ", " !!"}));
  EXPECT_EQ(split("don't!!\n"), (Pieces{"don", "'t", "!!", "\n"}));
  EXPECT_EQ(split("3.14159 1,000"), (Pieces{"3", ".", "14159", " 1", ",", "000"}));
}

TEST(Pretokenize, AllContractionsAreCaseSensitive) {
  EXPECT_EQ(split("I'm he'll they've we're it'd you'LL"),
            (Pieces{"I", "'m", " he", "'ll", " they", "'ve", " we", "'re", " it", "'d", " you", "'", "LL"}));
  EXPECT_EQ(split("x'sy '"), (Pieces{"x", "'s", "y", " '"}));
}

TEST(Pretokenize, WhitespaceRunsLeaveTheLastSpaceToTheNextWord) {
  // \s+(?!\S) takes a run but its last character, which then prefixes " b";
  // a lone \n before a letter falls to the final \s+.
  EXPECT_EQ(split("a  b\n\nc\t d   "), (Pieces{"a", " ", " b", "\n", "\n", "c", "\t", " d", "   "}));
  EXPECT_EQ(split("  \n"), (Pieces{"  \n"}));
  EXPECT_EQ(split(" "), (Pieces{" "}));
  EXPECT_EQ(split(""), (Pieces{}));
}

TEST(Pretokenize, UnicodeLettersAndNumbers) {
  // ï é are letters, 東京 letters (Lo), ٣٤ Arabic-Indic digits (Nd), ² is No.
  EXPECT_EQ(split("naïve café 東京 ٣٤ x²"), (Pieces{"naïve", " café", " 東京", " ٣٤", " x", "²"}));
  // U+3000 ideographic space is \s; U+00A0 too.
  EXPECT_EQ(split("a\u3000b"), (Pieces{"a", "\u3000", "b"}));
  // An emoji (So) is "other"; U+1D7D8 (mathematical digit, Nd) is a number beyond the BMP.
  EXPECT_EQ(split("hi 😀😀 \U0001D7D8\U0001D7D9"), (Pieces{"hi", " 😀😀", " \U0001D7D8\U0001D7D9"}));
}

TEST(Pretokenize, InvalidUtf8BytesAreOtherAndPiecesTileTheInput) {
  // 0xFF and a lone continuation byte 0x80 count as "other", like U+FFFD.
  std::string s = "ab\xFF\x80 \xFFz \xE6\x9D";  // \xE6\x9D: a truncated 3-byte sequence
  EXPECT_EQ(split(s), (Pieces{"ab", "\xFF\x80", " \xFF", "z", " \xE6\x9D"}));
  std::string joined;
  for (auto& p : split(s)) joined += p;
  EXPECT_EQ(joined, s);
}

TEST(Pretokenize, ClassTable) {
  using namespace tessera::data::unicode;
  EXPECT_EQ(classify('a'), kLetter);
  EXPECT_EQ(classify(0x00E9), kLetter);   // é
  EXPECT_EQ(classify(0x4E2D), kLetter);   // 中
  EXPECT_EQ(classify(0x0663), kNumber);   // ٣
  EXPECT_EQ(classify(0x2167), kNumber);   // Ⅷ (Nl)
  EXPECT_EQ(classify(0x00A0), kSpace);
  EXPECT_EQ(classify(0x2028), kSpace);
  EXPECT_EQ(classify(0x200B), kOther);    // zero-width space is not White_Space
  EXPECT_EQ(classify(0x1F600), kOther);   // 😀
  EXPECT_EQ(classify(0x20000), kLetter);  // CJK extension B
  EXPECT_EQ(classify(0xFFFFFFFFu), kOther);
}
