// The chat template's built-ins: Jinja's filters and tests that chat templates use (tojson as
// transformers replaces it: json.dumps with ensure_ascii=False), the str, dict methods they call,
// and the globals range, dict, namespace and strftime_now.
#include <algorithm>
#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

#include "data/chat_template_ast.h"

namespace zerodp::data::chat {
namespace {

const Value* arg(const Args& a, size_t i, std::string_view name) { return a.get(i, name); }

bool is_str(const Value* v) { return v && v->is_string(); }
bool is_none(const Value* v) { return !v || (v->is_json() && v->json->is_null()); }
const std::string& str(const Value& v) { return v.json->get_ref<const std::string&>(); }

int64_t int_arg(const Site& site, const Value* v, int64_t dflt, std::string_view what) {
  if (is_none(v)) return dflt;
  if (!v->is_json() || !(v->json->is_number_integer() || v->json->is_boolean()))
    site.fail(fmt::format("{} must be an integer, not {}", what, type_name(*v)));
  return v->json->is_boolean() ? int64_t{v->json->get<bool>()} : v->json->get<int64_t>();
}

std::string need_str(const Site& site, const Value& v, std::string_view what) {
  if (v.is_undefined()) return "";
  if (!v.is_string()) site.fail(fmt::format("{} needs a string, not {}", what, type_name(v)));
  return str(v);
}

std::string ascii_map(std::string s, int (*f)(int)) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_map(s, [](int c) { return std::tolower(c); });
  if (!out.empty() && static_cast<unsigned char>(out[0]) < 0x80) out[0] = static_cast<char>(std::toupper(out[0]));
  return out;
}

// Python's str.title on ASCII letters: a letter after a non-letter is upper, others lower.
std::string title(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    const bool letter = u < 0x80 && std::isalpha(u);
    if (letter) c = static_cast<char>(prev_letter ? std::tolower(u) : std::toupper(u));
    prev_letter = letter || u >= 0x80;
  }
  return out;
}

std::string replace(const Site& site, const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    for (size_t i = 0; i <= s.size();) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      if (i == s.size()) break;
      const size_t at = i;
      utf8_next(s, i);
      out.append(s, at, i - at);
      if (out.size() > site.limits.max_output_bytes) site.fail("a value would pass the output limit");
    }
    return out;
  }
  size_t start = 0;
  for (size_t at = s.find(old); at != std::string::npos && (count < 0 || done < count); at = s.find(old, start)) {
    out.append(s, start, at - start);
    out += with;
    start = at + old.size();
    ++done;
    if (out.size() > site.limits.max_output_bytes) site.fail("a value would pass the output limit");
  }
  out.append(s, start);
  return out;
}

// item.attribute for selectattr, map, join, sort, ...: dotted, with integer parts as indices.
Value attribute_of(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    start = dot + 1;
    if (!v.is_json()) return Value::undefined(fmt::format("no attribute '{}'", part.substr(0, 60)));
    const Json& j = *v.json;
    if (j.is_object() && j.contains(part)) {
      v = Value::part(v, j.at(part));
    } else if (j.is_array() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) && std::stoul(part) < j.size()) {
      v = Value::part(v, j[std::stoul(part)]);
    } else {
      return Value::undefined(fmt::format("'{}' object has no attribute '{}'", type_name(v), part.substr(0, 60)));
    }
    if (dot == path.size()) break;
  }
  return v;
}

std::vector<Value> elements(const Site& site, const Value& v, std::string_view filter) {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (!v.is_json()) site.fail(fmt::format("'{}' needs a sequence, not {}", filter, type_name(v)));
  const Json& j = *v.json;
  if (j.is_array()) {
    for (const Json& x : j) out.push_back(Value::part(v, x));
  } else if (j.is_object()) {
    for (const auto& [k, x] : j.items()) out.push_back(Value::of(k));
  } else if (j.is_string()) {
    const std::string& s = str(v);
    for (size_t i = 0; i < s.size();) {
      const size_t at = i;
      utf8_next(s, i);
      out.push_back(Value::of(s.substr(at, i - at)));
    }
  } else {
    site.fail(fmt::format("'{}' needs a sequence, not {}", filter, type_name(v)));
  }
  return out;
}

Value list_of(const Site& site, const std::vector<Value>& items) {
  Json out = Json::array();
  for (const Value& v : items) {
    if (!v.is_json()) site.fail(fmt::format("a list cannot hold a {}", type_name(v)));
    out.push_back(*v.json);
  }
  return Value::of(std::move(out));
}

// A copy for case-insensitive comparisons (sort, unique): strings lowered.
Value folded(const Value& v, bool case_sensitive) {
  if (case_sensitive || !v.is_string()) return v;
  return Value::of(ascii_map(str(v), [](int c) { return std::tolower(c); }));
}

// The arguments after the first `skip` positional ones, for select/map with a test or filter name.
Args rest(const Args& a, size_t skip) {
  Args r;
  for (size_t i = skip; i < a.positional.size(); ++i) r.positional.push_back(a.positional[i]);
  r.keyword = a.keyword;
  return r;
}

Value tojson(const Site& site, const Value& v, const Args& a) {
  if (v.is_undefined()) site.fail(fmt::format("tojson: {}", v.name));
  if (!v.is_json()) site.fail(fmt::format("tojson: a {} is not JSON serializable", type_name(v)));
  const Value* ensure_ascii = arg(a, 0, "ensure_ascii");
  if (ensure_ascii && truthy(*ensure_ascii)) site.fail("tojson: ensure_ascii=True is not supported");
  const int64_t indent = int_arg(site, arg(a, 1, "indent"), -1, "tojson's indent");
  std::string item_sep = indent < 0 ? ", " : ",", key_sep = ": ";
  if (const Value* sep = arg(a, 2, "separators"); !is_none(sep)) {
    if (!sep->is_json() || !sep->json->is_array() || sep->json->size() != 2 || !(*sep->json)[0].is_string() ||
        !(*sep->json)[1].is_string())
      site.fail("tojson: separators must be two strings");
    item_sep = (*sep->json)[0].get<std::string>();
    key_sep = (*sep->json)[1].get<std::string>();
  }
  const Value* sort_keys = arg(a, 3, "sort_keys");
  if (indent > 64) site.fail("tojson: an indent over 64");
  try {
    return Value::of(py_json(*v.json, static_cast<int>(indent), item_sep, key_sep, sort_keys && truthy(*sort_keys),
                             site.limits.max_output_bytes));
  } catch (const std::length_error&) {
    site.fail(fmt::format("tojson: the JSON would pass {} bytes", site.limits.max_output_bytes));
  } catch (const std::domain_error& e) {
    site.fail(fmt::format("tojson: the value is {}", e.what()));
  }
}

Value select(const Site& site, const Value& v, const Args& a, bool by_attribute, bool keep) {
  std::vector<Value> out;
  const size_t first = by_attribute ? 1 : 0;
  std::string attribute;
  if (by_attribute) {
    if (!is_str(arg(a, 0, "attribute"))) site.fail("selectattr/rejectattr need an attribute name");
    attribute = str(*arg(a, 0, "attribute"));
  }
  const Value* test = a.positional.size() > first ? &a.positional[first] : nullptr;
  if (test && !test->is_string()) site.fail("select: the test must be named by a string");
  const Args test_args = rest(a, first + 1);
  for (const Value& item : elements(site, v, "select")) {
    const Value x = by_attribute ? attribute_of(item, attribute) : item;
    const bool pass = test ? apply_test(site, str(*test), x, test_args) : truthy(x);
    if (pass == keep) out.push_back(item);
  }
  return list_of(site, out);
}

Value map(const Site& site, const Value& v, const Args& a) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (const auto& [k, x] : a.keyword) {
    if (k == "attribute") attribute = &x;
    else if (k == "default") dflt = &x;
  }
  if (attribute) {
    if (!attribute->is_string()) site.fail("map: attribute must be a string");
    for (const Value& item : elements(site, v, "map")) {
      Value x = attribute_of(item, str(*attribute));
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
    }
    return list_of(site, out);
  }
  if (a.positional.empty() || !a.positional[0].is_string()) site.fail("map needs a filter name or attribute=");
  const Args filter_args = rest(a, 1);
  for (const Value& item : elements(site, v, "map")) out.push_back(apply_filter(site, str(a.positional[0]), item, filter_args));
  return list_of(site, out);
}

Value sorted(const Site& site, const Value& v, const Args& a, bool unique_only) {
  const Value* attribute = arg(a, unique_only ? 1 : 2, "attribute");
  const Value* cs = arg(a, unique_only ? 0 : 1, "case_sensitive");
  const bool case_sensitive = cs && truthy(*cs);
  std::vector<Value> items = elements(site, v, unique_only ? "unique" : "sort");
  auto key = [&](const Value& x) { return folded(is_str(attribute) ? attribute_of(x, str(*attribute)) : x, case_sensitive); };
  if (unique_only) {
    std::vector<Value> out, seen;
    for (const Value& x : items) {
      const Value k = key(x);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, k); })) {
        seen.push_back(k);
        out.push_back(x);
      }
    }
    return list_of(site, out);
  }
  const Value* reverse = arg(a, 0, "reverse");
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = 0;
    if (!py_order(key(x), key(y), c)) site.fail(fmt::format("sort: '<' is not supported between '{}' and '{}'", type_name(x), type_name(y)));
    return c < 0;
  });
  if (reverse && truthy(*reverse)) std::reverse(items.begin(), items.end());
  return list_of(site, items);
}

Value indent(const Site& site, const Value& v, const Args& a) {
  const std::string s = py_str(v) + "\n";
  const Value* width = arg(a, 0, "width");
  std::string pad = is_str(width) ? str(*width) : std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(site, width, 4, "indent's width"), 0, 256)), ' ');
  const Value* first = arg(a, 1, "first");
  const Value* blank = arg(a, 2, "blank");
  std::vector<std::string> lines;
  for (size_t start = 0; start < s.size();) {
    const size_t nl = s.find('\n', start);
    lines.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  std::string out = lines.empty() ? std::string() : lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    out += '\n';
    if (!lines[i].empty() || (blank && truthy(*blank))) out += pad;
    out += lines[i];
  }
  if (first && truthy(*first)) out = pad + out;
  if (out.size() > site.limits.max_output_bytes) site.fail("indent: the result would pass the output limit");
  return Value::of(std::move(out));
}

}  // namespace

const Value* Args::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

Value apply_filter(const Site& site, std::string_view name, const Value& v, const Args& a) {
  if (name == "trim") {
    const Value* chars = arg(a, 0, "chars");
    const std::string c = is_str(chars) ? str(*chars) : std::string();
    return Value::of(py_strip(py_str(v), is_str(chars) ? &c : nullptr, true, true));
  }
  if (name == "tojson") return tojson(site, v, a);
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value::of(0);
    if (v.is_json() && v.json->is_string()) return Value::of(utf8_length(str(v)));
    if (v.is_json() && (v.json->is_array() || v.json->is_object())) return Value::of(v.json->size());
    site.fail(fmt::format("a {} has no length", type_name(v)));
  }
  if (name == "string") return Value::of(py_str(v));
  if (name == "safe") return v;
  if (name == "upper") return Value::of(ascii_map(py_str(v), [](int c) { return std::toupper(c); }));
  if (name == "lower") return Value::of(ascii_map(py_str(v), [](int c) { return std::tolower(c); }));
  if (name == "capitalize") return Value::of(capitalize(py_str(v)));
  if (name == "title") return Value::of(title(py_str(v)));
  if (name == "default" || name == "d") {
    const Value* boolean = arg(a, 1, "boolean");
    if (v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v))) {
      const Value* dflt = arg(a, 0, "default_value");
      return dflt ? *dflt : Value::of(std::string());
    }
    return v;
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::of(Json::array());
    if (!v.is_json() || !v.json->is_object()) site.fail(fmt::format("items: a {} is not a mapping", type_name(v)));
    Json out = Json::array();
    for (const auto& [k, x] : v.json->items()) out.push_back(Json::array({k, x}));
    return Value::of(std::move(out));
  }
  if (name == "list") return list_of(site, elements(site, v, "list"));
  if (name == "join") {
    const Value* sep = arg(a, 0, "d");
    const Value* attribute = arg(a, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : elements(site, v, "join")) {
      if (!first) out += sep ? py_str(*sep) : std::string();
      first = false;
      out += py_str(is_str(attribute) ? attribute_of(item, str(*attribute)) : item);
      if (out.size() > site.limits.max_output_bytes) site.fail("join: the result would pass the output limit");
    }
    return Value::of(std::move(out));
  }
  if (name == "first" || name == "last") {
    std::vector<Value> items = elements(site, v, name);
    if (items.empty()) return Value::undefined(fmt::format("'{}' of an empty sequence", name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    std::vector<Value> items = elements(site, v, "reverse");
    std::reverse(items.begin(), items.end());
    if (v.is_string()) {
      std::string out;
      for (const Value& c : items) out += str(c);
      return Value::of(std::move(out));
    }
    return list_of(site, items);
  }
  if (name == "select" || name == "reject") return select(site, v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(site, v, a, true, name == "selectattr");
  if (name == "map") return map(site, v, a);
  if (name == "sort") return sorted(site, v, a, false);
  if (name == "unique") return sorted(site, v, a, true);
  if (name == "replace") {
    const Value* old = arg(a, 0, "old");
    const Value* with = arg(a, 1, "new");
    if (!old || !with) site.fail("replace needs the old and the new text");
    return Value::of(replace(site, py_str(v), py_str(*old), py_str(*with), int_arg(site, arg(a, 2, "count"), -1, "replace's count")));
  }
  if (name == "indent") return indent(site, v, a);
  if (name == "escape" || name == "e") {
    static constexpr CharEscape kHtml[] = {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&#34;"}, {'\'', "&#39;"}};
    std::string out;
    append_escaped(py_str(v), kHtml, false, out);
    return Value::of(std::move(out));
  }
  if (name == "int" || name == "float" || name == "abs") {
    if (name == "abs") {
      if (v.is_json() && v.json->is_number_float()) return Value::of(std::abs(v.json->get<double>()));
      return int_arg(site, &v, 0, "abs's value") < 0 ? unary_op(site, Op::kNeg, v) : unary_op(site, Op::kPlus, v);
    }
    const Value* dflt = arg(a, 0, "default");
    if (v.is_json() && (v.json->is_number() || v.json->is_boolean())) {
      const double d = v.json->is_boolean() ? v.json->get<bool>() : v.json->get<double>();
      return name == "int" ? (v.json->is_number_integer() ? v : Value::of(static_cast<int64_t>(d))) : Value::of(d);
    }
    if (v.is_string()) {
      const std::string s = py_strip(str(v), nullptr, true, true);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size()) return name == "int" ? Value::of(static_cast<int64_t>(d)) : Value::of(d);
    }
    return dflt ? *dflt : (name == "int" ? Value::of(0) : Value::of(0.0));
  }
  if (name == "min" || name == "max" || name == "sum") {
    const std::vector<Value> items = elements(site, v, name);
    if (name == "sum") {
      Value total = arg(a, 1, "start") ? *arg(a, 1, "start") : Value::of(0);
      const Value* attribute = arg(a, 0, "attribute");
      for (const Value& x : items) total = binary_op(site, Op::kAdd, total, is_str(attribute) ? attribute_of(x, str(*attribute)) : x);
      return total;
    }
    if (items.empty()) return Value::undefined(fmt::format("'{}' of an empty sequence", name));
    Value best = items[0];
    for (const Value& x : items) {
      int c = 0;
      if (!py_order(x, best, c)) site.fail(fmt::format("{}: the items cannot be ordered", name));
      if ((name == "min" && c < 0) || (name == "max" && c > 0)) best = x;
    }
    return best;
  }
  site.fail(fmt::format("unknown or unsupported filter '{}'", name.substr(0, 60)));
}

bool apply_test(const Site& site, std::string_view name, const Value& v, const Args& a) {
  const Json* j = v.is_json() ? v.json.get() : nullptr;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return j && j->is_null();
  if (name == "boolean") return j && j->is_boolean();
  if (name == "true") return j && j->is_boolean() && j->get<bool>();
  if (name == "false") return j && j->is_boolean() && !j->get<bool>();
  if (name == "integer") return j && j->is_number_integer();
  if (name == "float") return j && j->is_number_float();
  if (name == "number") return j && (j->is_number() || j->is_boolean());
  if (name == "string") return j && j->is_string();
  if (name == "mapping") return j && j->is_object();
  if (name == "iterable" || name == "sequence") return v.is_undefined() || (j && (j->is_string() || j->is_array() || j->is_object()));
  if (name == "callable") return v.kind == Value::Kind::kMacro || v.kind == Value::Kind::kBuiltin;
  if (name == "lower" || name == "upper") {
    if (!j || !j->is_string()) return false;
    bool cased = false;
    for (char c : str(v)) {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        cased = true;
        if ((name == "lower") != (std::islower(static_cast<unsigned char>(c)) != 0)) return false;
      }
    }
    return cased;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    const int64_t x = int_arg(site, &v, 0, fmt::format("the '{}' test's value", name));
    const int64_t d = name == "divisibleby" ? int_arg(site, arg(a, 0, "num"), 1, "divisibleby's divisor") : 2;
    if (d == 0) site.fail("divisibleby 0");
    const int64_t m = ((x % d) + d) % d;
    return name == "odd" ? m == 1 : m == 0;
  }
  const Value* other = arg(a, 0, "b");
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas" || name == "ne" || name == "!=" ||
      name == "lt" || name == "lessthan" || name == "<" || name == "le" || name == "<=" || name == "gt" ||
      name == "greaterthan" || name == ">" || name == "ge" || name == ">=" || name == "in") {
    if (!other) site.fail(fmt::format("the '{}' test needs a value to compare with", name));
    if (name == "sameas") return py_equal(v, *other) && (!j || !other->is_json() || j->type() == other->json->type());
    const Op op = name == "eq" || name == "equalto" || name == "==" ? Op::kEq : name == "ne" || name == "!=" ? Op::kNe
                : name == "lt" || name == "lessthan" || name == "<" ? Op::kLt : name == "le" || name == "<=" ? Op::kLe
                : name == "gt" || name == "greaterthan" || name == ">" ? Op::kGt : name == "in" ? Op::kIn : Op::kGe;
    return compare_op(site, op, v, *other);
  }
  site.fail(fmt::format("unknown or unsupported test '{}'", name.substr(0, 60)));
}

bool call_method(const Site& site, const Value& v, std::string_view name, const Args& a, Value& result) {
  const Json& j = *v.json;
  if (j.is_object()) {
    if (name == "items") {
      result = apply_filter(site, "items", v, {});
    } else if (name == "keys" || name == "values") {
      Json out = Json::array();
      for (const auto& [k, x] : j.items()) out.push_back(name == "keys" ? Json(k) : x);
      result = Value::of(std::move(out));
    } else if (name == "get") {
      const Value* key = arg(a, 0, "key");
      const Value* dflt = arg(a, 1, "default");
      const auto it = key && key->is_string() ? j.find(str(*key)) : j.end();
      result = it != j.end() ? Value::part(v, *it) : dflt ? *dflt : Value::of(nullptr);
    } else {
      return false;
    }
    return true;
  }
  if (!j.is_string()) return false;
  const std::string& s = str(v);
  const Value* a0 = arg(a, 0, "");
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const std::string chars = is_str(a0) ? str(*a0) : std::string();
    result = Value::of(py_strip(s, is_str(a0) ? &chars : nullptr, name != "rstrip", name != "lstrip"));
  } else if (name == "startswith" || name == "endswith") {
    if (!a0) site.fail(fmt::format("{} needs an argument", name));
    std::vector<std::string> options;
    if (a0->is_string()) {
      options.push_back(str(*a0));
    } else if (a0->is_json() && a0->json->is_array()) {
      for (const Json& x : *a0->json) {
        if (!x.is_string()) site.fail(fmt::format("{} takes strings", name));
        options.push_back(x.get<std::string>());
      }
    } else {
      site.fail(fmt::format("{} takes a string or a tuple of strings, not {}", name, type_name(*a0)));
    }
    bool hit = false;
    for (const std::string& o : options) hit = hit || (name == "startswith" ? s.starts_with(o) : s.ends_with(o));
    result = Value::of(hit);
  } else if (name == "split" || name == "rsplit") {
    const Value* sep = arg(a, 0, "sep");
    const int64_t maxsplit = int_arg(site, arg(a, 1, "maxsplit"), -1, "split's maxsplit");
    if (name == "rsplit" && maxsplit >= 0) site.fail("rsplit with a maxsplit is not supported");
    std::string sep_text;
    if (!is_none(sep)) {
      sep_text = need_str(site, *sep, "split's separator");
      if (sep_text.empty()) site.fail("split: empty separator");
    }
    Json out = Json::array();
    for (std::string& part : py_split(s, is_none(sep) ? nullptr : &sep_text, maxsplit)) out.push_back(std::move(part));
    result = Value::of(std::move(out));
  } else if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    result = apply_filter(site, name, v, {});
  } else if (name == "replace") {
    result = apply_filter(site, "replace", v, a);
  } else if (name == "find" || name == "rfind" || name == "count") {
    const std::string needle = a0 ? need_str(site, *a0, name) : std::string();
    if (name == "count") {
      int64_t n = 0;
      if (needle.empty()) n = static_cast<int64_t>(utf8_length(s)) + 1;
      else
        for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
      result = Value::of(n);
    } else {
      const size_t at = name == "find" ? s.find(needle) : s.rfind(needle);
      result = Value::of(at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, at))));
    }
  } else if (name == "join") {
    if (!a0) site.fail("join needs a sequence");
    std::string out;
    bool first = true;
    for (const Value& item : elements(site, *a0, "join")) {
      if (!item.is_string()) site.fail(fmt::format("str.join takes strings, not {}", type_name(item)));
      if (!first) out += s;
      first = false;
      out += str(item);
      if (out.size() > site.limits.max_output_bytes) site.fail("join: the result would pass the output limit");
    }
    result = Value::of(std::move(out));
  } else if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    bool all = !s.empty();
    for (size_t i = 0; i < s.size() && all;) {
      const uint32_t cp = utf8_next(s, i);
      all = name == "isspace" ? py_isspace(cp)
          : cp < 0x80 && (name == "isdigit" ? std::isdigit(static_cast<int>(cp)) != 0
                          : name == "isalpha" ? std::isalpha(static_cast<int>(cp)) != 0 : std::isalnum(static_cast<int>(cp)) != 0);
    }
    result = Value::of(all);
  } else {
    return false;
  }
  return true;
}

bool is_builtin(std::string_view name) {
  return name == "range" || name == "dict" || name == "namespace" || name == "strftime_now";
}

Value call_builtin(const Site& site, std::string_view name, const Args& a) {
  if (name == "range") {
    if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3) site.fail("range takes 1 to 3 integers");
    const bool one = a.positional.size() == 1;
    const int64_t start = one ? 0 : int_arg(site, &a.positional[0], 0, "range's start");
    const int64_t stop = int_arg(site, &a.positional[one ? 0 : 1], 0, "range's stop");
    const int64_t step = a.positional.size() == 3 ? int_arg(site, &a.positional[2], 1, "range's step") : 1;
    if (step == 0) site.fail("range's step cannot be zero");
    const double count = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
    if (count > static_cast<double>(site.limits.max_iterations))
      site.fail(fmt::format("range of {} items: more than the {} iterations allowed", count, site.limits.max_iterations));
    Json out = Json::array();
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) out.push_back(start + i * step);
    return Value::of(std::move(out));
  }
  if (name == "dict") {
    Json out = Json::object();
    for (const auto& [k, v] : a.keyword) {
      if (!v.is_json()) site.fail(fmt::format("dict cannot hold a {}", type_name(v)));
      out[k] = *v.json;
    }
    return Value::of(std::move(out));
  }
  if (name == "namespace") {
    Value ns;
    ns.kind = Value::Kind::kNamespace;
    ns.ns = std::make_shared<Namespace>();
    for (const Value& p : a.positional) {
      if (!p.is_json() || !p.json->is_object()) site.fail("namespace() takes a dict or keyword arguments");
      for (const auto& [k, x] : p.json->items()) ns.ns->attributes.emplace_back(k, Value::part(p, x));
    }
    for (const auto& [k, v] : a.keyword) ns.ns->attributes.emplace_back(k, v);
    return ns;
  }
  // strftime_now(format): the render's clock, formatted by strftime.
  const Value* format = arg(a, 0, "format");
  if (!is_str(format)) site.fail("strftime_now takes a format string");
  if (str(*format).size() > 128) site.fail("strftime_now: a format over 128 bytes");
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), str(*format).c_str(), &site.now);
  if (n == 0 && !str(*format).empty()) site.fail("strftime_now: the formatted date is empty or too long");
  return Value::of(std::string(buf, n));
}

}  // namespace zerodp::data::chat
