// Loading a byte-level BPE tokenizer (bpe.h) from a tokenizer.json: each part of the file read and
// checked in turn, every refusal a UsageError naming the file and the key.
#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"
#include "data/bpe.h"
#include "data/bpe_model.h"
#include "data/bpe_decoder.h"
#include "data/byte_level.h"
#include "data/normalizer.h"
#include "data/tokenizer_json.h"

namespace zerodp::data {

using nlohmann::json;

namespace {

// The bytes a byte-level vocabulary string stands for; false if it has a character outside the table.
bool unmap_bytes(std::string_view s, std::string& out) {
  out.clear();
  const ByteTable& t = byte_table();
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = next_code_point(s, i);
    if (cp >= 512 || t.from_char[cp] < 0) return false;
    out.push_back(static_cast<char>(t.from_char[cp]));
  }
  return true;
}

void read_pre_tokenizer_step(const Reader& r, const json& v, const std::string& key, const std::string& type,
                             bool in_sequence, BpeModel& m) {
  PreStep step;
  if (type == "Metaspace") {
    if (in_sequence) r.fail(key, "Metaspace is supported only as the whole pre-tokenizer, not in a Sequence");
    Metaspace ms = read_metaspace(r, v, key);
    if (ms.split) {  // before each replacement: a Split of that string, MergedWithNext
      step.literal = ms.replacement;
      step.behavior = Behavior::kMergedWithNext;
      m.steps.push_back(std::move(step));
    }
    m.metaspace = std::move(ms);
    return;
  }
  if (type == "ByteLevel") {
    m.byte_level = true;
    const bool prefix = r.boolean(v, key, "add_prefix_space", false);
    if (prefix) {
      if (!m.steps.empty()) r.fail(key + ".add_prefix_space", "true is supported only on the first pre-tokenizer");
      m.prefix_space = true;
    }
    if (!r.boolean(v, key, "use_regex", true)) return;  // the mapping to characters only: implicit
    step.regex = std::make_unique<Regex>(kGpt2Pattern, r.name() + ": " + key);
  } else if (type == "Split") {
    r.pattern(r.get(v, key, "pattern"), key + ".pattern", step.regex, step.literal);
    const std::string& b = r.string(r.get(v, key, "behavior"), key + ".behavior");
    if (b == "Removed") step.behavior = Behavior::kRemoved;
    else if (b == "Isolated") step.behavior = Behavior::kIsolated;
    else if (b == "MergedWithPrevious") step.behavior = Behavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") step.behavior = Behavior::kMergedWithNext;
    else if (b == "Contiguous") step.behavior = Behavior::kContiguous;
    else r.fail(key + ".behavior", fmt::format("unknown behavior \"{}\"", describe_text(b)));
    step.invert = r.boolean(v, key, "invert", false);
  } else if (type == "Digits") {
    const bool individual = r.boolean(v, key, "individual_digits", false);
    step.regex = std::make_unique<Regex>(individual ? "\\p{N}" : "\\p{N}+", r.name() + ": " + key);
  } else {
    r.fail(key + ".type", fmt::format("pre-tokenizer \"{}\" is not supported (ByteLevel, Metaspace, Split, Digits, Sequence are)",
                                      describe_text(type)));
  }
  if (step.regex) ++m.regex_steps;
  m.steps.push_back(std::move(step));
}

void check_null_or(const Reader& r, const json& root, const char* key, const char* why) {
  if (const json* v = r.opt(root, key)) r.fail(key, fmt::format("{} (got {})", why, describe_json(*v)));
}

// The normalizer (normalizer.h), truncation and padding.
void check_top_level(const Reader& r, const json& root, BpeModel& m) {
  if (const json* n = r.opt(root, "normalizer")) m.normalizer = Normalizer::from_json(r, *n, "normalizer");
  check_null_or(r, root, "truncation", "must be null (truncation would change the ids)");
  check_null_or(r, root, "padding", "must be null (padding would change the ids)");
}

// model's type and options other than the vocabulary and merges.
void read_model_options(const Reader& r, const json& model, BpeModel& m) {
  if (const json* t = r.opt(model, "type")) {
    const std::string& type = r.string(*t, "model.type");
    if (type != "BPE") r.fail("model.type", fmt::format("\"{}\" is not supported (only \"BPE\")", describe_text(type)));
  }
  if (const json* d = r.opt(model, "dropout")) {
    if (!d->is_number() || d->get<double>() != 0.0) r.fail("model.dropout", fmt::format("must be null, got {}", describe_json(*d)));
  }
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = r.opt(model, k)) {
      if (!r.string(*v, std::string("model.") + k).empty())
        r.fail(std::string("model.") + k, fmt::format("must be null or empty, got {}", describe_json(*v)));
    }
  }
  m.byte_fallback = r.boolean(model, "model", "byte_fallback", false);
  m.ignore_merges = r.boolean(model, "model", "ignore_merges", false);
  m.fuse_unk = r.boolean(model, "model", "fuse_unk", false);
}

// The vocabulary, as read: (id, string) in file order, string -> id, and the largest id.
struct Vocab {
  std::vector<std::pair<uint32_t, std::string>> entries;
  std::unordered_map<std::string, uint32_t> ids;
  uint32_t max_id = 0;
};

Vocab read_vocab(const Reader& r, const json& model) {
  Vocab out;
  std::unordered_map<std::string, uint32_t>& ids = out.ids;
  std::vector<std::pair<uint32_t, std::string>>& entries = out.entries;
  uint32_t& max_id = out.max_id;
  const json& vocab = r.object(r.get(model, "model", "vocab"), "model.vocab");
  if (vocab.size() > BpeLimits::kMaxVocab)
    r.fail("model.vocab", fmt::format("{} tokens, over the {} allowed", vocab.size(), BpeLimits::kMaxVocab));
  ids.reserve(vocab.size());
  entries.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    auto key = [&] { return fmt::format("model.vocab[{}]", describe_text(it.key(), 32)); };
    if (it.key().size() > BpeLimits::kMaxTokenBytes)
      r.fail(key(), fmt::format("a token of {} bytes, over the {} allowed", it.key().size(), BpeLimits::kMaxTokenBytes));
    if (!it.value().is_number_integer()) r.fail(key(), fmt::format("must be an integer id, got {}", describe_json(it.value())));
    const int64_t raw = it.value().get<int64_t>();
    if (raw < 0 || static_cast<uint64_t>(raw) >= BpeLimits::kMaxVocab)
      r.fail(key(), fmt::format("id {} is outside 0..{}", raw, BpeLimits::kMaxVocab - 1));
    const auto id = static_cast<uint32_t>(raw);
    max_id = std::max(max_id, id);
    ids.emplace(it.key(), id);
    entries.emplace_back(id, it.key());
  }
  if (entries.empty()) r.fail("model.vocab", "is empty");
  return out;
}

// added_tokens; raises max_id to the largest added id.
void read_added_tokens(const Reader& r, const json& root, BpeModel& m, uint32_t& max_id) {
  if (const json* at = r.opt(root, "added_tokens")) {
    r.array(*at, "added_tokens");
    if (at->size() > BpeLimits::kMaxVocab)
      r.fail("added_tokens", fmt::format("{} tokens, over the {} allowed", at->size(), BpeLimits::kMaxVocab));
    // Contents seen so far: a repeated one is refused (a hash set, so that 300,000 tokens load in
    // well under a second; a comparison with every earlier token took a minute).
    std::unordered_set<std::string> seen;
    seen.reserve(at->size());
    for (size_t i = 0; i < at->size(); ++i) {
      const std::string key = fmt::format("added_tokens[{}]", i);
      const json& t = r.object((*at)[i], key);
      AddedToken a;
      a.id = r.id(r.get(t, key, "id"), key + ".id");
      a.content = r.string(r.get(t, key, "content"), key + ".content");
      if (a.content.empty()) r.fail(key + ".content", "must not be empty");
      a.special = r.boolean(t, key, "special", false);
      a.single_word = r.boolean(t, key, "single_word", false);
      a.lstrip = r.boolean(t, key, "lstrip", false);
      a.rstrip = r.boolean(t, key, "rstrip", false);
      a.normalized = r.boolean(t, key, "normalized", !a.special);
      if (!seen.insert(a.content).second)
        r.fail(key + ".content", fmt::format("{} is added twice", describe_text(a.content)));
      max_id = std::max(max_id, a.id);
      m.added.push_back(std::move(a));
    }
  }
}

// id -> bytes, the single-byte tokens and the whole-word table.
void build_id_table(const Reader& r, const Vocab& vocab, BpeModel& m) {
  const auto& entries = vocab.entries;
  const uint32_t max_id = vocab.max_id;
  std::string bytes;
  // id -> bytes. Ids are (nearly) dense in real files; holes are allowed only as many as there are
  // tokens, so that the table below is sized by what the file holds, never by an id it merely names.
  const size_t given = entries.size() + m.added.size();
  if (size_t{max_id} >= 2 * given + 1024)
    r.fail("model.vocab", fmt::format("id {} is far beyond the {} tokens the file gives (ids must be nearly dense)",
                                      max_id, given));
  const size_t V = size_t{max_id} + 1;
  m.token_bytes.assign(V, std::string());
  m.has_token.assign(V, 0);
  std::fill(std::begin(m.byte_id), std::end(m.byte_id), -1);
  std::fill(std::begin(m.fallback_id), std::end(m.fallback_id), -1);
  m.whole.reserve(entries.size());
  for (const auto& [id, s] : entries) {
    if (m.has_token[id])
      r.fail(fmt::format("model.vocab[{}]", describe_text(s, 32)), fmt::format("id {} is given to two tokens", id));
    m.has_token[id] = 1;
    if (!m.byte_level) {  // the vocabulary's strings are the text itself
      m.token_bytes[id] = s;
      m.whole.emplace(s, id);
      uint32_t cp = 0;
      if (!s.empty() && valid_utf8_at(s, 0, cp) == s.size()) m.char_id.emplace(cp, id);
      const int b = fallback_byte(s);
      if (b >= 0) m.fallback_id[b] = static_cast<int32_t>(id);
    } else if (unmap_bytes(s, bytes)) {
      m.token_bytes[id] = bytes;
      if (bytes.size() == 1) m.byte_id[static_cast<uint8_t>(bytes[0])] = static_cast<int32_t>(id);
      m.whole.emplace(bytes, id);
    } else {
      m.token_bytes[id] = s;  // a string outside the byte alphabet decodes to itself (as ByteLevel's decoder)
    }
  }
  m.is_added.assign(V, 0);
  for (const AddedToken& a : m.added) {
    m.token_bytes[a.id] = a.content;
    m.has_token[a.id] = 1;
    m.is_added[a.id] = 1;
  }
}

void read_unk_token(const Reader& r, const json& model, const Vocab& vocab, BpeModel& m) {
  const auto& ids = vocab.ids;
  if (const json* u = r.opt(model, "unk_token")) {
    const std::string& s = r.string(*u, "model.unk_token");
    auto it = ids.find(s);
    if (it == ids.end()) r.fail("model.unk_token", fmt::format("{} is not in the vocabulary", describe_text(s)));
    m.unk_id = it->second;
  }
}

// merges: "a b" or ["a", "b"], rank = position in the list.
void read_merges(const Reader& r, const json& model, const Vocab& vocab, BpeModel& m) {
  const auto& ids = vocab.ids;
  const json& merges = r.array(r.get(model, "model", "merges"), "model.merges");
  if (merges.size() > BpeLimits::kMaxMerges)
    r.fail("model.merges", fmt::format("{} merges, over the {} allowed", merges.size(), BpeLimits::kMaxMerges));
  m.pairs.reserve(merges.size());
  m.merges_count = merges.size();
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    const json& e = merges[i];
    std::string a, b;
    if (e.is_string()) {
      const std::string& s = r.string(e, key, 2 * BpeLimits::kMaxTokenBytes + 1);
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        r.fail(key, fmt::format("must be two tokens separated by one space, got {}", describe_json(e)));
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array()) {
      if (e.size() != 2) r.fail(key, fmt::format("must be a pair of tokens, got {}", describe_json(e)));
      a = r.string(e[0], key + "[0]");
      b = r.string(e[1], key + "[1]");
    } else {
      r.fail(key, fmt::format("must be a string \"a b\" or a pair [\"a\", \"b\"], got {}", describe_json(e)));
    }
    auto ia = ids.find(a), ib = ids.find(b), ic = ids.find(a + b);
    if (ia == ids.end()) r.fail(key, fmt::format("token {} is not in the vocabulary", describe_text(a)));
    if (ib == ids.end()) r.fail(key, fmt::format("token {} is not in the vocabulary", describe_text(b)));
    if (ic == ids.end()) r.fail(key, fmt::format("the merged token {} is not in the vocabulary", describe_text(a + b)));
    // A repeated pair keeps its first (lowest) rank, as tokenizers' map built in order would keep the last;
    // real files never repeat one.
    if (!m.pairs.insert(ia->second, ib->second, {static_cast<uint32_t>(i), ic->second}))
      r.fail(key, fmt::format("the pair {} {} is merged twice", describe_text(a), describe_text(b)));
  }
}

// The pre-tokenizer: with a ByteLevel step the vocabulary is byte-level; without one (null,
// Metaspace, Split, Digits) its strings are the text itself (SentencePiece-style).
void read_pre_tokenizer(const Reader& r, const json& root, BpeModel& m) {
  if (const json* pt = r.opt(root, "pre_tokenizer")) {
    read_steps(r, *pt, "pre_tokenizer", "pretokenizers", BpeLimits::kMaxPreTokenizers,
               [&](const json& s, const std::string& k, const std::string& t, bool in_sequence) {
                 read_pre_tokenizer_step(r, s, k, t, in_sequence, m);
               });
  }
  if (m.byte_level && m.metaspace) r.fail("pre_tokenizer", "Metaspace with a ByteLevel step is not supported");
  if (m.byte_level && m.byte_fallback)
    r.fail("model.byte_fallback", "true is supported only with a vocabulary that is not byte-level (no ByteLevel step)");
}

void read_decoder(const Reader& r, const json& root, BpeModel& m) {
  const json* d = r.opt(root, "decoder");
  if (!d) r.fail("decoder", "must be given (ByteLevel, Metaspace or a Sequence), got null");
  if (!m.byte_level) {
    m.decoder = DecoderChain::from_json(r, *d, "decoder");
    return;
  }
  r.object(*d, "decoder");
  const std::string& type = r.string(r.get(*d, "decoder", "type"), "decoder.type");
  if (type != "ByteLevel")
    r.fail("decoder.type", fmt::format("\"{}\" is not supported with a byte-level vocabulary (only \"ByteLevel\")",
                                       describe_text(type)));
}

// The post-processor's template: its ids must be tokens.
void read_document_tokens(const Reader& r, const json& root, BpeModel& m) {
  m.document = read_post_processor(r, r.opt(root, "post_processor"));
  for (const std::vector<uint32_t>* ids : {&m.document.before, &m.document.after})
    for (uint32_t id : *ids)
      if (id >= m.has_token.size() || !m.has_token[id])
        r.fail("post_processor", fmt::format("the template's id {} is not a token of the vocabulary", id));
}

// The added tokens' tries, one a pass; the regexes their flags need.
void index_added_tokens(BpeModel& m) {
  bool any_norm = false, any_raw = false;
  for (const AddedToken& a : m.added) (a.normalized ? any_norm : any_raw) = true;
  if (m.normalizer) {
    // Pass 0 finds the tokens that are not normalized in the text; pass 1 the others, normalized as
    // the library normalizes them, in each normalized piece.
    m.two_passes = any_norm;
    std::string buf;
    for (size_t k = 0; k < m.added.size(); ++k) {
      const AddedToken& a = m.added[k];
      const std::string_view content = a.normalized ? m.normalizer->apply(a.content, true, buf) : a.content;
      if (content.empty()) continue;
      m.added_tries[a.normalized ? 1 : 0].insert(content, static_cast<uint32_t>(k));
      if (a.normalized) m.token_bytes[a.id] = content;  // what the library decodes it to
    }
  }
  if (!m.normalizer) m.two_passes = any_norm && any_raw;
  for (size_t k = 0; k < m.added.size() && !m.normalizer; ++k) {
    const int pass = m.two_passes && m.added[k].normalized ? 1 : 0;
    m.added_tries[pass].insert(m.added[k].content, static_cast<uint32_t>(k));  // contents are distinct
  }
  for (int pass = 0; pass < 2; ++pass) m.single_first[pass] = m.added_tries[pass].single_first_byte();
  // Rust's regex \w, what tokenizers' single_word tests: Unicode word characters.
  m.word_char = std::make_unique<Regex>("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]", m.name);
  m.letter = std::make_unique<Regex>("\\p{L}", m.name);
}

// SentencePiece-style (not byte-level): where a whole piece's words and a long text may be cut.
void derive_word_cut(BpeModel& m) {
  const bool whole_words = m.steps.empty();  // no pre-tokenizer, or Metaspace without split
  if (whole_words && !m.ignore_merges) {  // (ignore_merges looks a whole word up: no cuts)
    if (m.metaspace) m.word_cut = m.metaspace->replacement;
    else if (m.normalizer) m.word_cut = m.normalizer->space_replacement();
  }
  m.pattern_label = m.metaspace ? "Metaspace" : whole_words ? "SentencePiece-style" : "";
  for (const auto& [s, id] : m.whole) {
    for (size_t at = m.word_cut.empty() ? std::string::npos : s.find(m.word_cut, 1); at != std::string::npos;
         at = s.find(m.word_cut, at + 1)) {
      size_t start;
      m.joins_word_cut.insert(prev_code_point(s, at, start));
    }
  }
  const bool split_words = m.metaspace && m.metaspace->split && m.steps.size() == 1;
  if (m.two_passes && m.normalizer) return;  // normalized added tokens might straddle a cut
  if (m.metaspace ? (!m.normalizer || m.normalizer->unicode_only()) && (split_words || !m.word_cut.empty())
                  : m.normalizer && m.normalizer->space_local() && !m.word_cut.empty())
    m.cut = CutRule::kSpaceAfterLetter;
}

// The end-of-text token, whether texts may be cut for threads, and describe()'s pattern label.
void derive_properties(BpeModel& m) {
  for (const char* s : {"<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|im_end|>", "</s>", "<eos>", "<s>"}) {
    for (const AddedToken& a : m.added)
      if (a.content == s) {
        m.eos = a.id;
        break;
      }
    if (m.eos) break;
  }

  bool regex_cut = !m.prefix_space && !m.steps.empty();
  for (const PreStep& st : m.steps) {
    const bool safe = st.regex && st.behavior == Behavior::kIsolated && !st.invert &&
                      (cut_safe_pattern(st.regex->pattern()) || st.regex->pattern() == "\\p{N}" || st.regex->pattern() == "\\p{N}+");
    if (!safe) regex_cut = false;
  }
  if (m.byte_level) {
    if (!m.normalizer) m.cut = regex_cut ? CutRule::kNewlineLetter : CutRule::kNone;
    else if (regex_cut && m.normalizer->unicode_only() && !m.two_passes) m.cut = CutRule::kNewlineAsciiLetter;
  } else {
    derive_word_cut(m);
  }
  for (const PreStep& st : m.steps) {
    if (!st.regex) continue;
    const std::string& p = st.regex->pattern();
    m.pattern_label = p == kGpt2Pattern ? "GPT-2 pattern" : p == kLlama3Pattern ? "Llama 3 pattern"
                       : p == kQwen2Pattern ? "Qwen 2 pattern" : m.pattern_label.empty() ? "custom pattern" : m.pattern_label;
  }
}

}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_json(std::string_view json_text, const std::string& name) {
  JsonLimits limits;
  limits.max_bytes = BpeLimits::kMaxFileBytes;
  limits.max_depth = 16;
  const json root = parse_json(json_text, name, limits);
  const Reader r(name);
  r.object(root, "(top level)");
  auto m = std::make_unique<BpeModel>();
  m->name = name;
  check_top_level(r, root, *m);
  const json& model = r.object(r.get(root, "", "model"), "model");
  read_model_options(r, model, *m);
  read_pre_tokenizer(r, root, *m);
  Vocab vocab = read_vocab(r, model);
  read_added_tokens(r, root, *m, vocab.max_id);
  build_id_table(r, vocab, *m);
  read_unk_token(r, model, vocab, *m);
  read_merges(r, model, vocab, *m);
  read_decoder(r, root, *m);
  read_document_tokens(r, root, *m);
  index_added_tokens(*m);
  derive_properties(*m);
  return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(std::move(m)));
}

}  // namespace zerodp::data
