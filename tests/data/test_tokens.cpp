// Token files (docs/reference/files.md#token-files): both layouts read back, and each kind of bad
// file is refused with a message naming the file (and, for a token out of range, its position and
// value).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/fs.h"
#include "data/tokenize.h"
#include "data/tokens.h"

namespace zerodp::data {
namespace {

class TokenFileTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) {
    const char* tmp = std::getenv("TMPDIR");
    created_.push_back(std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_tok_" + std::to_string(::getpid()) +
                       "_" + name);
    return created_.back();
  }
  void TearDown() override {
    for (const auto& f : created_) ::unlink(f.c_str());
  }
  void expect_refused(const std::string& file, int vocab, std::vector<std::string> needles) {
    needles.push_back(file);
    try {
      TokenFile::open(file, vocab);
      ADD_FAILURE() << "opened a bad token file; wanted an error mentioning " << needles[0];
    } catch (const UsageError& e) {
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }
  std::vector<std::string> created_;
};

std::string le16(const std::vector<uint16_t>& tokens) {
  std::string out;
  for (uint16_t t : tokens) {
    out.push_back(static_cast<char>(t & 0xFF));
    out.push_back(static_cast<char>(t >> 8));
  }
  return out;
}

// An llm.c header with explicit fields.
std::string header(int32_t magic, int32_t version, int32_t count) {
  std::string h(1024, '\0');
  const int32_t fields[3] = {magic, version, count};
  for (int f = 0; f < 3; ++f)
    for (int b = 0; b < 4; ++b)
      h[static_cast<size_t>(4 * f + b)] =
          static_cast<char>((static_cast<uint32_t>(fields[f]) >> (8 * b)) & 0xFF);
  return h;
}

TEST_F(TokenFileTest, RawStream) {
  const std::string f = path("raw.bin");
  write_file_atomic(f, le16({1, 300, 65535, 0, 7}));
  const TokenFile t = TokenFile::open(f, 65536);
  EXPECT_FALSE(t.has_llmc_header());
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0], 1);
  EXPECT_EQ(t[1], 300);
  EXPECT_EQ(t[2], 65535);
  EXPECT_EQ(t[4], 7);
  EXPECT_EQ(t.path(), f);
}

TEST_F(TokenFileTest, LlmcLayout) {
  const std::string f = path("llmc.bin");
  const std::vector<uint16_t> tokens = {50256, 12, 0, 999};
  write_token_file(f, tokens.data(), tokens.size());
  const std::string bytes = read_file(f);
  ASSERT_EQ(bytes.size(), 1024u + 8u);
  EXPECT_EQ(bytes.substr(0, 12), header(20240520, 1, 4).substr(0, 12));
  const TokenFile t = TokenFile::open(f, 50257);
  EXPECT_TRUE(t.has_llmc_header());
  ASSERT_EQ(t.size(), 4u);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(t[i], tokens[i]);
  // And raw, through the same writer.
  const std::string g = path("raw2.bin");
  write_token_file(g, tokens.data(), tokens.size(), /*llmc_layout=*/false);
  EXPECT_EQ(read_file(g).size(), 8u);
  EXPECT_FALSE(TokenFile::open(g, 50257).has_llmc_header());
}

TEST_F(TokenFileTest, BadFilesAreRefused) {
  const std::string empty = path("empty.bin");
  write_file_atomic(empty, std::string());
  expect_refused(empty, 256, {"empty"});

  const std::string odd = path("odd.bin");
  write_file_atomic(odd, std::string("abc"));
  expect_refused(odd, 256, {"odd"});

  const std::string short_header = path("short.bin");
  write_file_atomic(short_header, header(20240520, 1, 2).substr(0, 100));
  expect_refused(short_header, 256, {"bad header", "1024"});

  const std::string version = path("version.bin");
  write_file_atomic(version, header(20240520, 3, 2) + le16({1, 2}));
  expect_refused(version, 256, {"bad header", "version 3"});

  // Version 2 is uint32: two uint16 tokens' bytes are one uint32 token, not the two announced.
  const std::string width = path("width.bin");
  write_file_atomic(width, header(20240520, 2, 2) + le16({1, 2}));
  expect_refused(width, 256, {"bad header", "announces 2 tokens", "4 bytes", "a file of 1028 bytes"});

  const std::string count = path("count.bin");
  write_file_atomic(count, header(20240520, 1, 3) + le16({1, 2}));
  expect_refused(count, 256, {"bad header", "3 tokens", "(2 tokens)"});

  const std::string negative = path("negative.bin");
  write_file_atomic(negative, header(20240520, 1, -1) + le16({1, 2}));
  expect_refused(negative, 256, {"bad header", "-1 tokens"});

  const std::string no_tokens = path("none.bin");
  write_file_atomic(no_tokens, header(20240520, 1, 0));
  expect_refused(no_tokens, 256, {"no tokens"});

  const std::string big = path("big.bin");
  write_file_atomic(big, header(20240520, 1, 5) + le16({1, 2, 255, 256, 3}));
  expect_refused(big, 256, {"token 256", "position 3", "256"});
  EXPECT_EQ(TokenFile::open(big, 257).size(), 5u);

  expect_refused(path("missing.bin"), 256, {"No such file"});
}

std::string le32(const std::vector<uint32_t>& tokens) {
  std::string out;
  for (uint32_t t : tokens)
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((t >> (8 * b)) & 0xFF));
  return out;
}

TEST_F(TokenFileTest, Uint32Tokens) {
  const std::string f = path("u32.bin");
  const std::vector<uint32_t> tokens = {0, 65535, 65536, 151642, 7};
  write_file_atomic(f, llmc_header(tokens.size(), 4) + le32(tokens));
  EXPECT_EQ(read_file(f).substr(0, 12), header(20240520, 2, 5).substr(0, 12));
  const TokenFile t = TokenFile::open(f, 151643);
  EXPECT_TRUE(t.has_llmc_header());
  EXPECT_EQ(t.token_bytes(), 4);
  EXPECT_EQ(t.tokens16(), nullptr);
  ASSERT_NE(t.tokens32(), nullptr);
  ASSERT_EQ(t.size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(t[i], tokens[i]);
  std::vector<int32_t> copied(3);
  t.copy(2, 3, copied.data());
  EXPECT_EQ(copied, (std::vector<int32_t>{65536, 151642, 7}));
  // Any token at or over the vocabulary is refused with its position and value, above 65535 too.
  expect_refused(f, 151642, {"token 151642", "position 3", "151642"});
  expect_refused(f, 65536, {"token 65536", "position 2"});
  // uint16 files still read as before.
  const std::string g = path("u16.bin");
  write_token_file(g, std::vector<uint16_t>{3, 4}.data(), 2);
  EXPECT_EQ(TokenFile::open(g, 5).token_bytes(), 2);
  EXPECT_EQ(TokenFile::open(g, 5)[1], 4u);
}

TEST_F(TokenFileTest, TheMagicAlwaysMeansAHeader) {
  // Raw uint16 tokens 0xD888, 0x0134 spell the magic: such a file is read as a header, and refused
  // when the header does not hold, whatever a raw reading would give.
  const std::string f = path("magic_raw.bin");
  write_file_atomic(f, le16({0xD888, 0x0134, 5, 6, 7, 8}));
  expect_refused(f, 65536, {"bad header", "1024"});
  const std::string g = path("magic_count.bin");
  write_file_atomic(g, header(20240520, 2, 3) + le32({1, 2}));
  expect_refused(g, 256, {"announces 3 tokens", "8 bytes", "a file of 1032 bytes"});
}

TEST_F(TokenFileTest, TokenOutOfRangeFoundInALargeFile) {
  // Over the parallel scan's threshold: the first bad position is still the one reported.
  std::vector<uint16_t> tokens(3u << 20, 5);
  tokens[2'000'001] = 300;
  tokens[2'500'000] = 999;
  const std::string f = path("large.bin");
  write_token_file(f, tokens.data(), tokens.size());
  expect_refused(f, 256, {"token 300", "position 2000001"});
}

TEST_F(TokenFileTest, TokenizeWritesOneTokenPerByte) {
  const std::string text = path("text.txt"), out = path("tokens.bin");
  std::string content = "First Citizen:\nBefore we proceed";
  content.push_back(static_cast<char>(0xC3));  // bytes above 127 keep their value
  content.push_back(static_cast<char>(0xA9));
  content.push_back('\0');
  write_file_atomic(text, content);
  EXPECT_EQ(tokenize_bytes(text, out), content.size());
  const TokenFile t = TokenFile::open(out, kByteVocabSize);
  EXPECT_TRUE(t.has_llmc_header());
  ASSERT_EQ(t.size(), content.size());
  for (size_t i = 0; i < content.size(); ++i) EXPECT_EQ(t[i], static_cast<uint8_t>(content[i])) << i;

  const std::string blank = path("blank.txt"), out2 = path("blank.bin");
  write_file_atomic(blank, std::string());
  EXPECT_THROW(tokenize_bytes(blank, out2), UsageError);
  EXPECT_FALSE(file_exists(out2));
}

TEST_F(TokenFileTest, TokenizeTheShippedCorpus) {
  const char* src = std::getenv("ZERODP_SOURCE_DIR");
  const std::string root =
      src && *src ? std::string(src)
                  : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
  const std::string corpus = root + "/data/tinyshakespeare.txt";
  ASSERT_TRUE(file_exists(corpus)) << corpus
                                   << " is not there: it is part of the repository (data/tinyshakespeare.txt); "
                                      "set ZERODP_SOURCE_DIR to the source tree if the test runs elsewhere";
  const std::string out = path("shakespeare.bin");
  const size_t n = tokenize_bytes(corpus, out);
  const std::string text = read_file(corpus);
  EXPECT_EQ(n, text.size());
  const TokenFile t = TokenFile::open(out, kByteVocabSize);
  ASSERT_EQ(t.size(), text.size());
  EXPECT_EQ(t[0], static_cast<uint8_t>(text[0]));
  EXPECT_EQ(t[t.size() - 1], static_cast<uint8_t>(text.back()));
}

}  // namespace
}  // namespace zerodp::data
