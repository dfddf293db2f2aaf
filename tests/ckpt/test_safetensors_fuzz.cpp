// Fuzzing the safetensors parser: thousands of mutated, truncated and structurally perturbed files,
// each of which must either parse into tensors that lie inside the file and can be read whole, or be
// refused with a UsageError. Anything else (another exception, a crash, a read out of bounds, which
// an ASan build would catch) fails. Seeded, so a failure reproduces.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "core/error.h"

namespace zerodp::ckpt {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string with_length_prefix(const std::string& header) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header;
}

// Valid files to start from: all dtypes, metadata, an empty tensor, a scalar.
std::vector<std::string> seed_files() {
  std::vector<std::string> out;
  const std::vector<std::vector<TensorSpec>> sets = {
      {{"a", DType::kF32, {2, 3}}, {"b", DType::kBF16, {4}}, {"c", DType::kF16, {3, 1}}},
      {{"wte.weight", DType::kF32, {5, 4}}, {"empty", DType::kF16, {0}}, {"s", DType::kBF16, {}}},
      {{"x", DType::kF16, {1, 1, 2, 2}}},
  };
  const std::vector<Metadata> metas = {{{"n_layer", "2"}, {"format", "pt"}}, {}, {{"k", "v"}}};
  for (size_t i = 0; i < sets.size(); ++i) {
    std::string f = safetensors_header(sets[i], metas[i]);
    size_t bytes = 0;
    for (const auto& t : sets[i]) bytes += static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
    for (size_t k = 0; k < bytes; ++k) f.push_back(static_cast<char>((k * 37 + 11) & 0xFF));
    out.push_back(std::move(f));
  }
  return out;
}

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : gen_(seed) {}

  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(gen_() % n); }

  // Byte-level damage: flips, overwrites with JSON-significant characters, insertions, deletions,
  // truncation, duplication, and a rewritten header length.
  std::string mutate_bytes(std::string f) {
    static const char kInteresting[] = "{}[]\",:0123456789-+.eE \\u\x00\xff\x7f";
    const int ops = 1 + static_cast<int>(below(4));
    for (int op = 0; op < ops; ++op) {
      switch (below(7)) {
        case 0:
          if (!f.empty()) f[below(f.size())] ^= static_cast<char>(1u << below(8));
          break;
        case 1:
          if (!f.empty()) f[below(f.size())] = kInteresting[below(sizeof kInteresting - 1)];
          break;
        case 2: f.resize(below(f.size() + 1)); break;
        case 3: {
          std::string chunk(1 + below(8), '\0');
          for (char& c : chunk) c = static_cast<char>(gen_());
          f.insert(below(f.size() + 1), chunk);
          break;
        }
        case 4:
          if (!f.empty()) {
            const size_t at = below(f.size());
            f.erase(at, 1 + below(f.size() - at));
          }
          break;
        case 5:
          if (!f.empty()) {
            const size_t at = below(f.size());
            f.insert(below(f.size() + 1), f.substr(at, 1 + below(16)));
          }
          break;
        case 6:
          if (f.size() >= 8) {
            uint64_t n = 0;
            std::memcpy(&n, f.data(), 8);
            const uint64_t choices[] = {n + 1, n - 1, n + 8, n / 2, gen_(), 0, ~0ull, f.size() - 8ull};
            n = choices[below(8)];
            std::memcpy(f.data(), &n, 8);
          }
          break;
      }
    }
    return f;
  }

  ordered_json random_value(int depth = 0) {
    switch (below(depth > 1 ? 8 : 10)) {
      case 0: return nullptr;
      case 1: return static_cast<int64_t>(gen_() % 64) - 8;
      case 2: return gen_();  // huge unsigned
      case 3: return 2.5;
      case 4: {
        static const char* kStrings[] = {"F32", "BF16", "F16", "F64", "I64", "U8", "BOOL", "", "f32"};
        return kStrings[below(9)];
      }
      case 5: return true;
      case 6: return ordered_json::array({below(20), below(20)});
      case 7: return ordered_json::array({below(4)});
      case 8: {
        ordered_json a = ordered_json::array();
        for (size_t i = below(4); i > 0; --i) a.push_back(random_value(depth + 1));
        return a;
      }
      default: {
        ordered_json o = ordered_json::object();
        for (size_t i = below(3); i > 0; --i)
          o[std::string(1, static_cast<char>('a' + below(4)))] = random_value(depth + 1);
        return o;
      }
    }
  }

  // JSON-level damage that keeps the header parseable, to reach the checks behind the parser:
  // fields replaced by values of other types, fields removed, tensors added, renamed, or moved,
  // offsets shifted; the header length is kept consistent, the data section sometimes resized.
  std::string mutate_json(const std::string& file) {
    uint64_t n = 0;
    std::memcpy(&n, file.data(), 8);
    ordered_json h = ordered_json::parse(file.substr(8, n));
    std::string data = file.substr(8 + n);
    std::vector<std::string> names;
    for (const auto& [k, v] : h.items()) names.push_back(k);
    const int ops = 1 + static_cast<int>(below(3));
    for (int op = 0; op < ops; ++op) {
      const std::string& name = names[below(names.size())];
      ordered_json& entry = h[name];
      static const char* kFields[] = {"dtype", "shape", "data_offsets"};
      const char* field = kFields[below(3)];
      switch (below(8)) {
        case 0: entry = random_value(); break;
        case 1:
          if (entry.is_object()) entry[field] = random_value();
          break;
        case 2:
          if (entry.is_object()) entry.erase(field);
          break;
        case 3:
          if (entry.is_object() && entry.contains("data_offsets") && entry["data_offsets"].is_array() &&
              entry["data_offsets"].size() == 2 && entry["data_offsets"][1].is_number_unsigned())
            entry["data_offsets"][1] = entry["data_offsets"][1].get<uint64_t>() + below(5) - 2;
          break;
        case 4:
          h["extra" + std::to_string(below(3))] = {
              {"dtype", "F32"}, {"shape", {below(3)}}, {"data_offsets", {below(40), below(40)}}};
          break;
        case 5: data.resize(below(data.size() + 9)); break;
        case 6:
          if (entry.is_object() && entry.contains("shape") && entry["shape"].is_array())
            entry["shape"].push_back(below(3));
          break;
        case 7: h["__metadata__"] = random_value(); break;
      }
    }
    std::string header = h.dump();
    if (below(2)) header.append(below(8), ' ');
    return with_length_prefix(header) + data;
  }

 private:
  std::mt19937_64 gen_;
};

struct FuzzOutcome {
  int parsed = 0;
  int refused = 0;
};

void check_one(const std::string& f, FuzzOutcome* out) {
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(f.data());
  try {
    const SafetensorsReader r = SafetensorsReader::parse(bytes, f.size(), "fuzz.safetensors");
    for (const TensorEntry& t : r.tensors()) {
      ASSERT_GE(t.data, bytes + 8);
      ASSERT_LE(t.data + t.nbytes, bytes + f.size());
      ASSERT_EQ(t.nbytes, t.numel * dtype_size(t.dtype));
      std::vector<float> all(t.numel);
      r.read_f32(t.name, 0, t.numel, all.data());
    }
    ++out->parsed;
  } catch (const UsageError&) {
    ++out->refused;
  } catch (const std::exception& e) {
    FAIL() << "not a UsageError: " << e.what();
  }
}

TEST(SafetensorsFuzz, MutatedBytesParseOrAreRefused) {
  Fuzzer fz(20240520);
  const std::vector<std::string> seeds = seed_files();
  FuzzOutcome outcome;
  for (int i = 0; i < 20000; ++i) {
    check_one(fz.mutate_bytes(seeds[static_cast<size_t>(i) % seeds.size()]), &outcome);
    if (HasFatalFailure()) return;
  }
  // Every prefix of a valid file, too.
  for (const std::string& s : seeds)
    for (size_t len = 0; len < s.size(); ++len) check_one(s.substr(0, len), &outcome);
  RecordProperty("parsed", outcome.parsed);
  RecordProperty("refused", outcome.refused);
  EXPECT_GT(outcome.refused, 1000);
  EXPECT_GT(outcome.parsed, 10) << "the mutations never left a valid file: the fuzzer is too blunt";
}

TEST(SafetensorsFuzz, StructurallyPerturbedHeadersParseOrAreRefused) {
  Fuzzer fz(7);
  const std::vector<std::string> seeds = seed_files();
  FuzzOutcome outcome;
  for (int i = 0; i < 12000; ++i) {
    check_one(fz.mutate_json(seeds[static_cast<size_t>(i) % seeds.size()]), &outcome);
    if (HasFatalFailure()) return;
  }
  RecordProperty("parsed", outcome.parsed);
  RecordProperty("refused", outcome.refused);
  EXPECT_GT(outcome.refused, 1000);
  EXPECT_GT(outcome.parsed, 100);
}

}  // namespace
}  // namespace zerodp::ckpt
