// Reading and applying a tokenizer.json's decoder chain, and reading its post-processor's template
// (bpe_decoder.h).
#include "data/bpe_decoder.h"

#include <utility>

#include <fmt/format.h>

#include "data/byte_level.h"
#include "data/tokenizer_json.h"

namespace zerodp::data {

namespace {

constexpr size_t kMaxSteps = 16;           // steps of a decoder Sequence
constexpr size_t kMaxTemplateItems = 16;   // items of a template, ids of one special token

void read_decoder_step(const Reader& r, const json& v, const std::string& key, const std::string& type,
                       std::vector<DecoderChain::Step>& steps) {
  DecoderChain::Step s;
  if (type == "Replace") {
    s.kind = DecoderChain::Kind::kReplace;
    const json& pat = r.object(r.get(v, key, "pattern"), key + ".pattern");
    const json* lit = r.opt(pat, "String");
    if (!lit) r.fail(key + ".pattern", "only a \"String\" pattern is supported in a decoder");
    s.pattern = r.string(*lit, key + ".pattern.String", BpeLimits::kMaxPatternBytes);
    if (s.pattern.empty()) r.fail(key + ".pattern.String", "must not be empty");
    s.content = r.string(r.get(v, key, "content"), key + ".content");
  } else if (type == "ByteFallback" || type == "Fuse") {
    s.kind = type == "Fuse" ? DecoderChain::Kind::kFuse : DecoderChain::Kind::kByteFallback;
  } else if (type == "Strip") {
    s.kind = DecoderChain::Kind::kStrip;
    s.content = r.one_char(r.get(v, key, "content"), key + ".content");
    s.start = r.count(r.get(v, key, "start"), key + ".start", BpeLimits::kMaxTokenBytes);
    s.stop = r.count(r.get(v, key, "stop"), key + ".stop", BpeLimits::kMaxTokenBytes);
  } else if (type == "Metaspace") {
    s.kind = DecoderChain::Kind::kMetaspace;
    const Metaspace ms = read_metaspace(r, v, key);
    s.content = ms.replacement;
    s.prepends = ms.prepend != Metaspace::Prepend::kNever;
  } else {
    r.fail(key + ".type", fmt::format("decoder \"{}\" is not supported with this vocabulary (Metaspace, Replace, "
                                      "ByteFallback, Fuse, Strip, Sequence are)",
                                      describe_text(type)));
  }
  steps.push_back(std::move(s));
}

// The start of each character of s (valid or not: a stray byte is one), and s.size() at the end.
void char_starts(const std::string& s, std::vector<size_t>& starts) {
  starts.clear();
  for (size_t i = 0; i < s.size();) {
    starts.push_back(i);
    const size_t n = utf8_len(static_cast<uint8_t>(s[i]));
    i = i + n <= s.size() ? i + n : i + 1;
  }
  starts.push_back(s.size());
}

void apply_step(const DecoderChain::Step& s, std::vector<std::string>& tokens) {
  switch (s.kind) {
    case DecoderChain::Kind::kReplace:
      for (std::string& t : tokens) {
        std::string out;
        size_t at = 0;
        for (size_t f; (f = t.find(s.pattern, at)) != std::string::npos; at = f + s.pattern.size()) {
          out.append(t, at, f - at);
          out += s.content;
        }
        out.append(t, at, std::string::npos);
        t = std::move(out);
      }
      return;
    case DecoderChain::Kind::kByteFallback: {
      std::vector<std::string> out;
      std::string bytes;
      bool in_run = false;
      for (std::string& t : tokens) {
        const int b = fallback_byte(t);
        if (b >= 0) {
          bytes += static_cast<char>(b);
          in_run = true;
          continue;
        }
        if (in_run) out.push_back(std::move(bytes));
        bytes.clear();
        in_run = false;
        out.push_back(std::move(t));
      }
      if (in_run) out.push_back(std::move(bytes));
      tokens = std::move(out);
      return;
    }
    case DecoderChain::Kind::kFuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      return;
    }
    case DecoderChain::Kind::kStrip: {
      std::vector<size_t> starts;
      for (std::string& t : tokens) {
        char_starts(t, starts);
        const size_t n = starts.size() - 1;  // characters
        auto is_content = [&](size_t k) { return t.compare(starts[k], starts[k + 1] - starts[k], s.content) == 0; };
        size_t b = 0, e = n;
        while (b < s.start && b < n && is_content(b)) ++b;
        for (size_t k = 0; k < s.stop && e > 0 && is_content(e - 1); ++k) --e;
        t = e > b ? t.substr(starts[b], starts[e] - starts[b]) : std::string();
      }
      return;
    }
    case DecoderChain::Kind::kMetaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        std::string out;
        const std::string& t = tokens[i];
        size_t at = 0;
        for (size_t f; (f = t.find(s.content, at)) != std::string::npos; at = f + s.content.size()) {
          out.append(t, at, f - at);
          if (!(i == 0 && s.prepends)) out += ' ';
        }
        out.append(t, at, std::string::npos);
        tokens[i] = std::move(out);
      }
      return;
  }
}

}  // namespace

std::unique_ptr<DecoderChain> DecoderChain::from_json(const Reader& r, const json& v, const std::string& key) {
  auto d = std::make_unique<DecoderChain>();
  read_steps(r, v, key, "decoders", kMaxSteps, [&](const json& s, const std::string& k, const std::string& t, bool) {
    read_decoder_step(r, s, k, t, d->steps_);
  });
  return d;
}

std::string DecoderChain::decode(std::vector<std::string>& tokens) const {
  for (const Step& s : steps_) apply_step(s, tokens);
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

Metaspace read_metaspace(const Reader& r, const json& v, const std::string& key) {
  Metaspace ms;
  ms.replacement = r.one_char(r.get(v, key, "replacement"), key + ".replacement");
  if (const json* p = r.opt(v, "prepend_scheme")) {
    const std::string& scheme = r.string(*p, key + ".prepend_scheme");
    if (scheme == "always") ms.prepend = Metaspace::Prepend::kAlways;
    else if (scheme == "first") ms.prepend = Metaspace::Prepend::kFirst;
    else if (scheme == "never") ms.prepend = Metaspace::Prepend::kNever;
    else r.fail(key + ".prepend_scheme", fmt::format("unknown scheme \"{}\" (always, first, never)", describe_text(scheme)));
  }
  if (!r.boolean(v, key, "add_prefix_space", true)) ms.prepend = Metaspace::Prepend::kNever;  // the older key
  ms.split = r.boolean(v, key, "split", true);
  return ms;
}

int fallback_byte(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

DocumentTokens read_post_processor(const Reader& r, const json* v) {
  DocumentTokens doc;
  if (!v) return doc;
  const json* tp = nullptr;
  std::string tkey;
  read_steps(r, *v, "post_processor", "processors", kMaxSteps,
             [&](const json& step, const std::string& k, const std::string& type, bool) {
               if (type == "ByteLevel") {
                 doc.trim_offsets = r.boolean(step, k, "trim_offsets", true);
                 doc.trim_keeps_prefix_space = r.boolean(step, k, "add_prefix_space", true);
               }
               if (type != "TemplateProcessing") return;  // (the others change no ids: ignored)
               if (tp) r.fail(k, "a second TemplateProcessing is not supported");
               tp = &step;
               tkey = k;
             });
  if (!tp) return doc;
  const json& single = r.array(r.get(*tp, tkey, "single"), tkey + ".single");
  if (single.size() > kMaxTemplateItems)
    r.fail(tkey + ".single", fmt::format("{} items, over the {} allowed", single.size(), kMaxTemplateItems));
  const json& specials = r.object(r.get(*tp, tkey, "special_tokens"), tkey + ".special_tokens");
  bool seen_text = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string k = fmt::format("{}.single[{}]", tkey, i);
    r.object(single[i], k);
    if (r.opt(single[i], "Sequence")) {
      if (seen_text) r.fail(k, "a second $A/$B in the single template is not supported");
      seen_text = true;
      continue;
    }
    const json* st = r.opt(single[i], "SpecialToken");
    if (!st) r.fail(k, "must hold \"SpecialToken\" or \"Sequence\"");
    const std::string& name = r.string(r.get(r.object(*st, k + ".SpecialToken"), k + ".SpecialToken", "id"),
                                       k + ".SpecialToken.id");
    auto it = specials.find(name);
    if (it == specials.end())
      r.fail(k + ".SpecialToken.id", fmt::format("{} is not in {}.special_tokens", describe_text(name), tkey));
    const std::string sk = fmt::format("{}.special_tokens[{}]", tkey, describe_text(name, 32));
    const json& ids = r.array(r.get(r.object(*it, sk), sk, "ids"), sk + ".ids");
    if (ids.size() > kMaxTemplateItems) r.fail(sk + ".ids", fmt::format("{} ids, over the {} allowed", ids.size(), kMaxTemplateItems));
    for (size_t j = 0; j < ids.size(); ++j)
      (seen_text ? doc.after : doc.before).push_back(r.id(ids[j], fmt::format("{}.ids[{}]", sk, j)));
  }
  if (!seen_text) r.fail(tkey + ".single", "has no $A (a Sequence item)");
  return doc;
}

}  // namespace zerodp::data
