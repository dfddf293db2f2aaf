// Python's operators on the chat template's values: arithmetic on ints (64-bit, overflow an error)
// and floats, + on strings and lists, ~, comparisons and `in`.
#include <cmath>

#include <fmt/format.h>

#include "data/chat_template_ast.h"

namespace zerodp::data::chat {
namespace {

bool is_num(const Value& v) { return v.is_json() && (v.json->is_number() || v.json->is_boolean()); }
bool is_int(const Value& v) { return v.is_json() && (v.json->is_number_integer() || v.json->is_boolean()); }
int64_t as_int(const Value& v) { return v.json->is_boolean() ? int64_t{v.json->get<bool>()} : v.json->get<int64_t>(); }
double as_double(const Value& v) { return v.json->is_boolean() ? (v.json->get<bool>() ? 1.0 : 0.0) : v.json->get<double>(); }

const char* symbol(Op op) {
  switch (op) {
    case Op::kAdd: return "+";
    case Op::kSub: return "-";
    case Op::kMul: return "*";
    case Op::kDiv: return "/";
    case Op::kFloorDiv: return "//";
    case Op::kMod: return "%";
    case Op::kPow: return "**";
    case Op::kConcat: return "~";
    case Op::kNeg: return "-";
    case Op::kPlus: return "+";
    case Op::kEq: return "==";
    case Op::kNe: return "!=";
    case Op::kLt: return "<";
    case Op::kLe: return "<=";
    case Op::kGt: return ">";
    case Op::kGe: return ">=";
    case Op::kIn: return "in";
    case Op::kNotIn: return "not in";
  }
  return "?";
}

[[noreturn]] void bad_operands(const Site& site, Op op, const Value& a, const Value& b) {
  if (a.is_undefined()) site.fail(a.name);
  if (b.is_undefined()) site.fail(b.name);
  site.fail(fmt::format("unsupported operand types for {}: '{}' and '{}'", symbol(op), type_name(a), type_name(b)));
}

void check_size(const Site& site, size_t bytes) {
  if (bytes > site.limits.max_output_bytes)
    site.fail(fmt::format("a value would pass {} bytes", site.limits.max_output_bytes));
}

Value int_result(const Site& site, bool overflow, int64_t r) {
  if (overflow) site.fail("integer overflow (the template's integers are 64-bit)");
  return Value::of(r);
}

Value repeat(const Site& site, const Value& seq, int64_t times) {
  if (times <= 0) return Value::of(seq.json->is_string() ? Json(std::string()) : Json::array());
  const size_t unit = seq.json->is_string() ? seq.json->get_ref<const std::string&>().size() : seq.json->size() * 16;
  if (unit != 0 && static_cast<uint64_t>(times) > site.limits.max_output_bytes / unit)
    site.fail(fmt::format("a value would pass {} bytes", site.limits.max_output_bytes));
  if (seq.json->is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.json->get_ref<const std::string&>();
    return Value::of(std::move(out));
  }
  Json out = Json::array();
  for (int64_t i = 0; i < times; ++i)
    for (const Json& x : *seq.json) out.push_back(x);
  return Value::of(std::move(out));
}

bool contains(const Site& site, const Value& needle, const Value& hay) {
  if (hay.is_undefined()) return false;
  if (hay.is_json()) {
    const Json& h = *hay.json;
    if (h.is_string()) {
      if (!needle.is_string()) site.fail(fmt::format("'in <string>' needs a string on the left, not {}", type_name(needle)));
      return h.get_ref<const std::string&>().find(needle.json->get_ref<const std::string&>()) != std::string::npos;
    }
    if (h.is_array()) {
      for (const Json& x : h)
        if (py_equal(needle, Value::part(hay, x))) return true;
      return false;
    }
    if (h.is_object()) return needle.is_string() && h.contains(needle.json->get_ref<const std::string&>());
  }
  site.fail(fmt::format("a {} cannot be searched with 'in'", type_name(hay)));
}

}  // namespace

Value unary_op(const Site& site, Op op, const Value& a) {
  if (!is_num(a)) site.fail(fmt::format("bad operand type for unary {}: '{}'", symbol(op), type_name(a)));
  if (op == Op::kPlus) return a.json->is_boolean() ? Value::of(as_int(a)) : a;
  if (a.json->is_number_float()) return Value::of(-a.json->get<double>());
  const int64_t v = as_int(a);
  return int_result(site, v == INT64_MIN, -v);
}

Value binary_op(const Site& site, Op op, const Value& a, const Value& b) {
  if (op == Op::kConcat) {
    const std::string x = py_str(a), y = py_str(b);
    check_size(site, x.size() + y.size());
    return Value::of(x + y);
  }
  if (is_num(a) && is_num(b)) {
    const bool ints = is_int(a) && is_int(b);
    if (ints) {
      const int64_t x = as_int(a), y = as_int(b);
      int64_t r = 0;
      switch (op) {
        case Op::kAdd: {
          const bool overflow = __builtin_add_overflow(x, y, &r);
          return int_result(site, overflow, r);
        }
        case Op::kSub: {
          const bool overflow = __builtin_sub_overflow(x, y, &r);
          return int_result(site, overflow, r);
        }
        case Op::kMul: {
          const bool overflow = __builtin_mul_overflow(x, y, &r);
          return int_result(site, overflow, r);
        }
        case Op::kFloorDiv:
        case Op::kMod: {
          if (y == 0) site.fail("integer division or modulo by zero");
          if (x == INT64_MIN && y == -1) site.fail("integer overflow (the template's integers are 64-bit)");
          int64_t q = x / y, m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) {
            --q;
            m += y;
          }
          return Value::of(op == Op::kFloorDiv ? q : m);
        }
        case Op::kPow:
          if (y >= 0) {
            int64_t r2 = 1;
            for (int64_t i = 0; i < y; ++i) {
              if (__builtin_mul_overflow(r2, x, &r2)) site.fail("integer overflow (the template's integers are 64-bit)");
              if (r2 == 0 || r2 == 1) break;
            }
            return Value::of(r2);
          }
          break;
        default: break;
      }
    }
    const double x = as_double(a), y = as_double(b);
    switch (op) {
      case Op::kAdd: return Value::of(x + y);
      case Op::kSub: return Value::of(x - y);
      case Op::kMul: return Value::of(x * y);
      case Op::kDiv:
        if (y == 0) site.fail("division by zero");
        return Value::of(x / y);
      case Op::kFloorDiv:
        if (y == 0) site.fail("float floor division by zero");
        return Value::of(std::floor(x / y));
      case Op::kMod: {
        if (y == 0) site.fail("float modulo by zero");
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::of(m);
      }
      case Op::kPow: return Value::of(std::pow(x, y));
      default: break;
    }
  }
  if (a.is_json() && b.is_json()) {
    const Json& x = *a.json;
    const Json& y = *b.json;
    if (op == Op::kAdd && x.is_string() && y.is_string()) {
      check_size(site, x.get_ref<const std::string&>().size() + y.get_ref<const std::string&>().size());
      return Value::of(x.get_ref<const std::string&>() + y.get_ref<const std::string&>());
    }
    if (op == Op::kAdd && x.is_array() && y.is_array()) {
      Json out = x;
      for (const Json& v : y) out.push_back(v);
      return Value::of(std::move(out));
    }
    if (op == Op::kMul && (x.is_string() || x.is_array()) && is_int(b)) return repeat(site, a, as_int(b));
    if (op == Op::kMul && (y.is_string() || y.is_array()) && is_int(a)) return repeat(site, b, as_int(a));
    if (op == Op::kMod && x.is_string()) site.fail("'%' string formatting is not supported");
  }
  bad_operands(site, op, a, b);
}

bool compare_op(const Site& site, Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::kEq: return py_equal(a, b);
    case Op::kNe: return !py_equal(a, b);
    case Op::kIn: return contains(site, a, b);
    case Op::kNotIn: return !contains(site, a, b);
    default: break;
  }
  int c = 0;
  if (!py_order(a, b, c)) {
    if (a.is_undefined()) site.fail(a.name);
    if (b.is_undefined()) site.fail(b.name);
    site.fail(fmt::format("'{}' is not supported between '{}' and '{}'", symbol(op), type_name(a), type_name(b)));
  }
  switch (op) {
    case Op::kLt: return c < 0;
    case Op::kLe: return c <= 0;
    case Op::kGt: return c > 0;
    default: return c >= 0;
  }
}

}  // namespace zerodp::data::chat
