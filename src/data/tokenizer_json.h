// Reading a tokenizer.json's parts (bpe_json.cpp, normalizer.cpp, bpe_decoder.cpp): typed accessors
// whose every refusal is a UsageError naming the file and the key, with values described briefly
// (core/json.h: describe_json never echoes a whole value).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "data/bpe.h"
#include "data/bpe_regex.h"
#include "data/byte_level.h"

namespace zerodp::data {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw UsageError(fmt::format("{}: {}: {}", name_, key, what));
  }
  const json& get(const json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(path.empty() ? key : path + "." + key, "missing");
    return *it;
  }
  const json* opt(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json& object(const json& v, const std::string& key) const {
    if (!v.is_object()) fail(key, fmt::format("must be an object, got {}", describe_json(v)));
    return v;
  }
  const json& array(const json& v, const std::string& key) const {
    if (!v.is_array()) fail(key, fmt::format("must be an array, got {}", describe_json(v)));
    return v;
  }
  const std::string& string(const json& v, const std::string& key, size_t max = BpeLimits::kMaxTokenBytes) const {
    if (!v.is_string()) fail(key, fmt::format("must be a string, got {}", describe_json(v)));
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > max) fail(key, fmt::format("a string of {} bytes, over the {} allowed", s.size(), max));
    return s;
  }
  bool boolean(const json& obj, const std::string& path, const char* key, bool dflt) const {
    const json* v = opt(obj, key);
    if (!v) return dflt;
    if (!v->is_boolean()) fail(path + "." + key, fmt::format("must be true or false, got {}", describe_json(*v)));
    return v->get<bool>();
  }
  uint32_t id(const json& v, const std::string& key) const {
    if (!v.is_number_integer()) fail(key, fmt::format("must be an integer id, got {}", describe_json(v)));
    const int64_t i = v.get<int64_t>();
    if (i < 0 || static_cast<uint64_t>(i) >= BpeLimits::kMaxVocab)
      fail(key, fmt::format("id {} is outside 0..{}", i, BpeLimits::kMaxVocab - 1));
    return static_cast<uint32_t>(i);
  }
  // A non-negative integer no greater than `max`.
  size_t count(const json& v, const std::string& key, size_t max) const {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > max)
      fail(key, fmt::format("must be an integer in 0..{}, got {}", max, describe_json(v)));
    return static_cast<size_t>(v.get<uint64_t>());
  }
  // A string of exactly one character (UTF-8), returned as its bytes.
  const std::string& one_char(const json& v, const std::string& key) const {
    const std::string& s = string(v, key, 8);
    size_t i = 0;
    if (!s.empty()) next_code_point(s, i);
    if (s.empty() || i != s.size()) fail(key, fmt::format("must be one character, got {}", describe_json(v)));
    return s;
  }
  // A `pattern` object at `key`: {"Regex": ...} compiled into `regex`, or {"String": ...} (not empty)
  // into `literal`.
  void pattern(const json& v, const std::string& key, std::unique_ptr<Regex>& regex, std::string& literal) const {
    object(v, key);
    if (const json* re = opt(v, "Regex")) {
      regex = std::make_unique<Regex>(string(*re, key + ".Regex", BpeLimits::kMaxPatternBytes), name_ + ": " + key + ".Regex");
    } else if (const json* lit = opt(v, "String")) {
      literal = string(*lit, key + ".String", BpeLimits::kMaxPatternBytes);
      if (literal.empty()) fail(key + ".String", "must not be empty");
    } else {
      fail(key, "must hold \"Regex\" or \"String\"");
    }
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// Reads `v`, one step or a Sequence of at most `max` of them under `list_key` (normalizers,
// pretokenizers, decoders; not nested): read_one(step, key, type, in_sequence) for each.
template <class ReadOne>
void read_steps(const Reader& r, const json& v, const std::string& key, const char* list_key, size_t max,
                ReadOne read_one) {
  r.object(v, key);
  const std::string& type = r.string(r.get(v, key, "type"), key + ".type");
  if (type != "Sequence") {
    read_one(v, key, type, false);
    return;
  }
  const json& list = r.array(r.get(v, key, list_key), key + "." + list_key);
  if (list.size() > max) r.fail(key + "." + list_key, fmt::format("{} steps, over the {} allowed", list.size(), max));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string k = fmt::format("{}.{}[{}]", key, list_key, i);
    r.object(list[i], k);
    const std::string& t = r.string(r.get(list[i], k, "type"), k + ".type");
    if (t == "Sequence") r.fail(k, "a Sequence inside a Sequence is not supported");
    read_one(list[i], k, t, true);
  }
}

}  // namespace zerodp::data
