// The inside of data/chat_template.h: tokens, the parsed template (statements and expressions), the
// values a render computes with, and the functions that the lexer, parser, evaluator and built-ins
// (filters, tests, methods, Python's str() and json.dumps) give one another. Not for other rooms.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/chat_template.h"

namespace zerodp::data::chat {

using Json = nlohmann::ordered_json;

// Where in the template (1-based).
struct Pos {
  int line = 1, column = 1;
};

// A UsageError "NAME line L, column C: WHAT".
[[noreturn]] void fail(std::string_view name, Pos pos, std::string_view what);

// ---- tokens (chat_template_lexer.cpp) ----
enum class Tok : uint8_t { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
struct Token {
  Tok kind;
  Pos pos;
  std::string text;  // data, a name, a string's value, an operator, a number's spelling
};
// The tokens of `source` with Jinja's whitespace rules as transformers sets them (trim_blocks,
// lstrip_blocks, `-`/`+` markers, one final newline dropped, comments removed, raw blocks as data).
std::vector<Token> lex(std::string_view source, std::string_view name, const ChatLimits& limits);

// ---- the parsed template (chat_template_parser.cpp) ----
enum class Op : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kNeg, kPlus,
                          kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };
enum class ExprKind : uint8_t { kLiteral, kName, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary,
                                kCompare, kAnd, kOr, kNot, kCond, kList, kDict };
struct Expr {
  ExprKind kind;
  Pos pos;
  Op op = Op::kAdd;                    // kUnary, kBinary
  bool negated = false;                // kTest: `is not`
  std::string name;                    // kName, kAttr, kFilter, kTest
  std::shared_ptr<const Json> literal; // kLiteral
  // kAttr/kItem/kFilter/kTest: [object, args...]; kSlice: [object, start, stop, step] (null when
  // left out); kCall: [callee, args...]; kUnary/kNot: [x]; kBinary/kAnd/kOr: [a, b];
  // kCompare: [first, rest...] with ops; kCond: [then, condition, else or null]; kList: items;
  // kDict: key, value, key, value, ...
  std::vector<std::unique_ptr<Expr>> children;
  std::vector<std::string> keywords;   // kCall/kFilter/kTest: the names of the last keywords.size() args
  std::vector<Op> ops;                 // kCompare
};

enum class StmtKind : uint8_t { kText, kPrint, kIf, kFor, kSet, kSetAttr, kSetBlock, kMacro, kGeneration, kBreak, kContinue };
struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;
struct Stmt {
  StmtKind kind;
  Pos pos;
  std::string text;                    // kText
  // kPrint: [value]; kIf: the conditions; kFor: [iterable, filter or null]; kSet: [value];
  // kSetAttr: [value]; kMacro: the parameters' defaults (null: none)
  std::vector<std::unique_ptr<Expr>> exprs;
  // kIf: a body per condition, then the else body; kFor: body, else body; kSetBlock, kMacro,
  // kGeneration: the body
  std::vector<Body> bodies;
  // kFor/kSet: the target names (two or more: unpacking); kSetAttr: {namespace, attribute};
  // kSetBlock: {name}; kMacro: {name, parameters...}
  std::vector<std::string> names;
};

struct Program {
  Body body;
  bool has_generation = false;
};
Program parse(const std::vector<Token>& tokens, std::string_view name, const ChatLimits& limits);

// ---- values (chat_template_values.cpp) ----
struct Namespace;
struct LoopState;
struct Value {
  enum class Kind : uint8_t { kUndefined, kJson, kNamespace, kMacro, kLoop, kBuiltin };
  Kind kind = Kind::kUndefined;
  std::shared_ptr<const Json> json;  // kJson: may alias a part of a bigger immutable tree
  std::shared_ptr<Namespace> ns;
  std::shared_ptr<LoopState> loop;
  const Stmt* macro = nullptr;
  std::string name;  // kUndefined: what was asked for (for errors); kBuiltin: the function

  static Value of(Json j) { Value v; v.kind = Kind::kJson; v.json = std::make_shared<const Json>(std::move(j)); return v; }
  // A part of `parent`'s tree, sharing its ownership.
  static Value part(const Value& parent, const Json& child) {
    Value v; v.kind = Kind::kJson; v.json = std::shared_ptr<const Json>(parent.json, &child); return v;
  }
  static Value undefined(std::string what) { Value v; v.name = std::move(what); return v; }
  bool is_json() const { return kind == Kind::kJson; }
  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_string() const { return is_json() && json->is_string(); }
  const Json& j() const { return *json; }
};
struct Namespace {
  std::vector<std::pair<std::string, Value>> attributes;
};
struct LoopState {
  std::vector<Value> items;
  size_t index0 = 0;
};

// Python's type name of a value ("str", "int", "list", "dict", "NoneType", "undefined", ...).
std::string type_name(const Value& v);
bool truthy(const Value& v);
// Python's str() (Jinja's output of a value): None, True, 1.5, ['a', 1], {'k': 'v'}.
std::string py_str(const Value& v);
// json.dumps(v, ensure_ascii=False, indent=indent (negative: none), separators, sort_keys).
// A result over max_bytes, or nesting deeper than 512, is a std::length_error / std::domain_error.
std::string py_json(const Json& v, int indent, std::string_view item_sep, std::string_view key_sep,
                    bool sort_keys, size_t max_bytes);
// Python's ==, and <-style ordering (-1, 0, 1; false when the types do not order).
bool py_equal(const Value& a, const Value& b);
bool py_order(const Value& a, const Value& b, int& result);

// UTF-8 by code points, as Python's str.
size_t utf8_length(std::string_view s);
// The byte offset of code point `index` (clamped to [0, length]).
size_t utf8_offset(std::string_view s, size_t index);
// Python's str.isspace on one code point; the code point at s[i] (advancing i).
bool py_isspace(uint32_t cp);

// A character and the text that stands for it: the escaping tables of tojson, escape and string literals.
struct CharEscape {
  char c;
  std::string_view text;
};
// The entry of `table` for c, or null.
const CharEscape* find_escape(std::span<const CharEscape> table, char c);
// Appends s to out, each character of `table` replaced by its text (and, with hex_controls, every other
// byte below 0x20 by \u00XX).
void append_escaped(std::string_view s, std::span<const CharEscape> table, bool hex_controls, std::string& out);
uint32_t utf8_next(std::string_view s, size_t& i);
// str.strip/lstrip/rstrip: with chars null, Python's whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit): sep null splits on runs of whitespace.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit);

// ---- the built-ins (chat_template_builtins.cpp, chat_template_ops.cpp) ----
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Positional `index`, else keyword `name`, else null.
  const Value* get(size_t index, std::string_view name) const;
};
// What a built-in needs from the render: where it is called, to fail there; the bounds; the clock;
// a way to apply a test by name (select, selectattr).
struct Site {
  std::string_view template_name;
  Pos pos;
  const ChatLimits& limits;
  const std::tm& now;
  [[noreturn]] void fail(std::string_view what) const { chat::fail(template_name, pos, what); }
};
Value apply_filter(const Site& site, std::string_view name, const Value& object, const Args& args);
bool apply_test(const Site& site, std::string_view name, const Value& object, const Args& args);
// A method of a str, dict or list (`s.strip()`, `d.items()`); false when there is no such method.
bool call_method(const Site& site, const Value& object, std::string_view name, const Args& args, Value& result);
// range, dict, namespace, strftime_now (raise_exception is the evaluator's).
Value call_builtin(const Site& site, std::string_view name, const Args& args);
bool is_builtin(std::string_view name);
// Python's operators: - + on one value; + - * / // % ** ~ on two; == != < <= > >= in, not in.
Value unary_op(const Site& site, Op op, const Value& a);
Value binary_op(const Site& site, Op op, const Value& a, const Value& b);
bool compare_op(const Site& site, Op op, const Value& a, const Value& b);

// Renders a parsed template (chat_template_eval.cpp): `variables` is a JSON object of the names it sees.
ChatRendered evaluate(const Program& program, std::string_view name, const ChatLimits& limits, const Json& variables,
                      const std::tm& now);

}  // namespace zerodp::data::chat
