// The chat template's parser: Jinja's grammar (statements and the precedence of its expressions:
// if-else < or < and < not < comparisons < + - < ~ < * / // % < ** < unary - + < filters and
// tests < . [] () on a primary), tokens to the tree of chat_template_ast.h.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "data/chat_template_ast.h"

namespace zerodp::data::chat {
namespace {

using ExprPtr = std::unique_ptr<Expr>;

ExprPtr make(ExprKind kind, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

ExprPtr literal(Json value, Pos pos) {
  auto e = make(ExprKind::kLiteral, pos);
  e->literal = std::make_shared<const Json>(std::move(value));
  return e;
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, std::string_view name, const ChatLimits& limits)
      : t_(tokens), name_(name), limits_(limits) {}

  Program run() {
    Program program;
    std::string end;
    program.body = body({}, end);
    program.has_generation = has_generation_;
    return program;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(std::string_view op, size_t ahead = 0) const { return peek(ahead).kind == Tok::kOp && peek(ahead).text == op; }
  bool is_name(std::string_view n, size_t ahead = 0) const { return peek(ahead).kind == Tok::kName && peek(ahead).text == n; }
  bool skip_op(std::string_view op) { return is_op(op) ? (++i_, true) : false; }
  bool skip_name(std::string_view n) { return is_name(n) ? (++i_, true) : false; }

  [[noreturn]] void unexpected(std::string_view wanted) {
    const Token& tok = peek();
    std::string got;
    switch (tok.kind) {
      case Tok::kEnd: got = "the end of the template"; break;
      case Tok::kVarEnd: got = "'}}'"; break;
      case Tok::kBlockEnd: got = "'%}'"; break;
      case Tok::kData: got = "template text"; break;
      case Tok::kString: got = "a string"; break;
      default: got = fmt::format("'{}'", tok.text.substr(0, 40)); break;
    }
    fail(name_, tok.pos, fmt::format("expected {}, got {}", wanted, got));
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) unexpected(fmt::format("'{}'", op));
  }
  std::string expect_name() {
    if (peek().kind != Tok::kName) unexpected("a name");
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != Tok::kBlockEnd) unexpected("'%}'");
    ++i_;
  }

  struct Depth {
    Parser& p;
    Depth(Parser& parser, Pos pos) : p(parser) {
      if (++p.depth_ > p.limits_.max_nesting)
        fail(p.name_, pos, fmt::format("nested deeper than {} levels", p.limits_.max_nesting));
    }
    ~Depth() { --p.depth_; }
  };

  // ---- statements ----

  // Statements up to a block tag whose keyword is in `ends` (returned in `end`, the keyword
  // consumed); at the template's end when `ends` is empty.
  Body body(const std::vector<std::string_view>& ends, std::string& end, Pos opened = {}) {
    Body out;
    while (true) {
      const Token& tok = peek();
      if (tok.kind == Tok::kEnd) {
        if (ends.empty()) return out;
        fail(name_, opened, fmt::format("this block is not closed: '{{% {} %}}' is missing", ends.back()));
      }
      if (tok.kind == Tok::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->pos = tok.pos;
        s->text = next().text;
        out.push_back(std::move(s));
      } else if (tok.kind == Tok::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kPrint;
        s->pos = next().pos;
        s->exprs.push_back(expression(true));
        if (peek().kind != Tok::kVarEnd) unexpected("'}}'");
        ++i_;
        out.push_back(std::move(s));
      } else if (tok.kind == Tok::kBlockBegin) {
        ++i_;
        if (peek().kind != Tok::kName) unexpected("a tag name");
        for (std::string_view e : ends) {
          if (peek().text == e) {
            end = next().text;
            return out;
          }
        }
        out.push_back(statement());
      } else {
        unexpected("template text or a tag");
      }
    }
  }

  // After a body that ended at `end`: the `else` body up to `closer` when there is one, else an empty one.
  void else_body(Stmt& s, std::string& end, std::string_view closer) {
    if (end != "else") {
      s.bodies.emplace_back();
      return;
    }
    expect_block_end();
    s.bodies.push_back(body({closer}, end, s.pos));
  }

  std::unique_ptr<Stmt> statement() {
    const Token& tok = peek();
    Depth depth(*this, tok.pos);
    auto s = std::make_unique<Stmt>();
    s->pos = tok.pos;
    const std::string keyword = next().text;
    std::string end;
    if (keyword == "if") {
      s->kind = StmtKind::kIf;
      while (true) {
        s->exprs.push_back(expression(true));
        expect_block_end();
        s->bodies.push_back(body({"elif", "else", "endif"}, end, s->pos));
        if (end != "elif") break;
      }
      else_body(*s, end, "endif");
    } else if (keyword == "for") {
      s->kind = StmtKind::kFor;
      s->names = targets(false);
      if (!skip_name("in")) unexpected("'in'");
      s->exprs.push_back(expression(false));
      s->exprs.push_back(skip_name("if") ? expression(true) : nullptr);
      if (is_name("recursive")) fail(name_, peek().pos, "recursive loops are not supported");
      expect_block_end();
      ++loops_;
      s->bodies.push_back(body({"else", "endfor"}, end, s->pos));
      --loops_;
      else_body(*s, end, "endfor");
    } else if (keyword == "set") {
      s->names = targets(true);
      if (skip_op("=")) {
        s->kind = s->names.size() == 2 && s->names[1].starts_with(".") ? StmtKind::kSetAttr : StmtKind::kSet;
        if (s->kind == StmtKind::kSetAttr) s->names[1].erase(0, 1);
        s->exprs.push_back(tuple_or_expression());
      } else {
        if (s->names.size() != 1) fail(name_, s->pos, "a '{% set %}' block assigns one name");
        s->kind = StmtKind::kSetBlock;
        expect_block_end();
        s->bodies.push_back(body({"endset"}, end, s->pos));
        end_tag();
        return s;
      }
    } else if (keyword == "macro") {
      s->kind = StmtKind::kMacro;
      s->names.push_back(expect_name());
      expect_op("(");
      while (!skip_op(")")) {
        if (s->names.size() > 1) expect_op(",");
        if (skip_op(")")) break;
        s->names.push_back(expect_name());
        s->exprs.push_back(skip_op("=") ? expression(true) : nullptr);
      }
      expect_block_end();
      const int outer_loops = loops_;
      loops_ = 0;
      s->bodies.push_back(body({"endmacro"}, end, s->pos));
      loops_ = outer_loops;
      if (peek().kind == Tok::kName) ++i_;  // `{% endmacro name %}`
    } else if (keyword == "generation") {
      s->kind = StmtKind::kGeneration;
      has_generation_ = true;
      expect_block_end();
      s->bodies.push_back(body({"endgeneration"}, end, s->pos));
    } else if (keyword == "break" || keyword == "continue") {
      if (loops_ == 0) fail(name_, s->pos, fmt::format("'{{% {} %}}' outside a loop", keyword));
      s->kind = keyword == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect_block_end();
      return s;
    } else {
      fail(name_, s->pos, fmt::format("unknown or unsupported tag '{}'", keyword.substr(0, 40)));
    }
    end_tag();
    return s;
  }

  // The rest of an end tag (`endif %}`, its keyword read by body()).
  void end_tag() { expect_block_end(); }

  // for/set targets: `a`, `a, b`, `(a, b)`, and for set `ns.attr` (returned as {ns, ".attr"}).
  std::vector<std::string> targets(bool allow_attr) {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      names.push_back(expect_name());
      if (allow_attr && names.size() == 1 && skip_op(".")) {
        names.push_back(".");
        names.back() += expect_name();
        return names;
      }
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  // ---- expressions ----

  ExprPtr tuple_or_expression() {
    const Pos pos = peek().pos;
    ExprPtr first = expression(true);
    if (!is_op(",")) return first;
    auto list = make(ExprKind::kList, pos);
    list->children.push_back(std::move(first));
    while (skip_op(",")) {
      if (peek().kind == Tok::kBlockEnd) break;
      list->children.push_back(expression(true));
    }
    return list;
  }

  // The items of a list or dict literal up to `close` (a trailing comma allowed): a dict's as key,
  // value, key, value, ...
  void literal_items(Expr& into, std::string_view close, bool pairs) {
    while (!skip_op(close)) {
      if (!into.children.empty()) expect_op(",");
      if (skip_op(close)) break;
      into.children.push_back(expression(true));
      if (pairs) {
        expect_op(":");
        into.children.push_back(expression(true));
      }
    }
  }

  ExprPtr expression(bool with_condition) {
    Depth depth(*this, peek().pos);
    ExprPtr e = or_expr();
    while (with_condition && is_name("if")) {
      const Pos pos = next().pos;
      auto c = make(ExprKind::kCond, pos);
      ExprPtr cond = or_expr();
      ExprPtr otherwise = skip_name("else") ? expression(true) : nullptr;
      c->children.push_back(std::move(e));
      c->children.push_back(std::move(cond));
      c->children.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(ExprKind kind, Op op, ExprPtr a, ExprPtr b, Pos pos) {
    auto e = make(kind, pos);
    e->op = op;
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  // A left-associative level: operands of the next level joined by any of `ops` (operators, or the
  // keywords `or` and `and`).
  ExprPtr chain(ExprPtr (Parser::*operand)(), std::initializer_list<std::pair<std::string_view, Op>> ops, ExprKind kind) {
    ExprPtr e = (this->*operand)();
    while (true) {
      const Token& tok = peek();
      const auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) {
        return (tok.kind == Tok::kOp || tok.kind == Tok::kName) && tok.text == o.first;
      });
      if (it == ops.end()) return e;
      ++i_;
      e = binary(kind, it->second, std::move(e), (this->*operand)(), tok.pos);
    }
  }
  ExprPtr or_expr() { return chain(&Parser::and_expr, {{"or", Op::kAdd}}, ExprKind::kOr); }
  ExprPtr and_expr() { return chain(&Parser::not_expr, {{"and", Op::kAdd}}, ExprKind::kAnd); }
  ExprPtr not_expr() {
    if (is_name("not")) {
      const Pos pos = next().pos;
      Depth depth(*this, pos);
      auto e = make(ExprKind::kNot, pos);
      e->children.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    const Pos pos = peek().pos;
    ExprPtr first = math1();
    ExprPtr e;
    while (true) {
      Op op;
      if (peek().kind == Tok::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                      peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
        const std::string& t = next().text;
        op = t == "==" ? Op::kEq : t == "!=" ? Op::kNe : t == "<" ? Op::kLt : t == "<=" ? Op::kLe : t == ">" ? Op::kGt : Op::kGe;
      } else if (is_name("in")) {
        ++i_;
        op = Op::kIn;
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = Op::kNotIn;
      } else {
        break;
      }
      if (!e) {
        e = make(ExprKind::kCompare, pos);
        e->children.push_back(std::move(first));
      }
      e->ops.push_back(op);
      e->children.push_back(math1());
    }
    return e ? std::move(e) : std::move(first);
  }
  ExprPtr math1() { return chain(&Parser::concat, {{"+", Op::kAdd}, {"-", Op::kSub}}, ExprKind::kBinary); }
  ExprPtr concat() { return chain(&Parser::math2, {{"~", Op::kConcat}}, ExprKind::kBinary); }
  ExprPtr math2() {
    return chain(&Parser::power, {{"*", Op::kMul}, {"/", Op::kDiv}, {"//", Op::kFloorDiv}, {"%", Op::kMod}}, ExprKind::kBinary);
  }
  ExprPtr power() { return chain(&Parser::filtered_unary, {{"**", Op::kPow}}, ExprKind::kBinary); }
  ExprPtr filtered_unary() { return unary(true); }
  ExprPtr unary(bool with_filter) {
    const Pos pos = peek().pos;
    Depth depth(*this, pos);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const bool minus = next().text == "-";
      e = make(ExprKind::kUnary, pos);
      e->op = minus ? Op::kNeg : Op::kPlus;
      e->children.push_back(unary(false));
    } else {
      e = postfix(primary());
    }
    return with_filter ? filters(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token& tok = peek();
    const Pos pos = tok.pos;
    switch (tok.kind) {
      case Tok::kName: {
        const std::string& n = next().text;
        if (n == "true" || n == "True") return literal(true, pos);
        if (n == "false" || n == "False") return literal(false, pos);
        if (n == "none" || n == "None") return literal(nullptr, pos);
        auto e = make(ExprKind::kName, pos);
        e->name = n;
        return e;
      }
      case Tok::kString: {
        std::string s = next().text;
        while (peek().kind == Tok::kString) s += next().text;  // adjacent strings join, as in Python
        return literal(std::move(s), pos);
      }
      case Tok::kInt: {
        const std::string& text = next().text;
        int64_t v = 0;
        const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
        if (r.ec != std::errc() || r.ptr != text.data() + text.size())
          fail(name_, pos, "an integer literal out of the 64-bit range");
        return literal(v, pos);
      }
      case Tok::kFloat: return literal(std::strtod(next().text.c_str(), nullptr), pos);
      case Tok::kOp:
        if (tok.text == "(") {
          ++i_;
          if (skip_op(")")) return make(ExprKind::kList, pos);
          ExprPtr first = expression(true);
          if (skip_op(")")) return first;
          auto list = make(ExprKind::kList, pos);
          list->children.push_back(std::move(first));
          while (skip_op(",")) {
            if (is_op(")")) break;
            list->children.push_back(expression(true));
          }
          expect_op(")");
          return list;
        }
        if (tok.text == "[" || tok.text == "{") {
          ++i_;
          const bool dict = tok.text == "{";
          auto literal = make(dict ? ExprKind::kDict : ExprKind::kList, pos);
          literal_items(*literal, dict ? "}" : "]", dict);
          return literal;
        }
        break;
      default: break;
    }
    unexpected("an expression");
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      const Pos pos = peek().pos;
      if (skip_op(".")) {
        Depth depth(*this, pos);
        auto a = make(peek().kind == Tok::kInt ? ExprKind::kItem : ExprKind::kAttr, pos);
        a->children.push_back(std::move(e));
        if (a->kind == ExprKind::kItem) a->children.push_back(primary());
        else a->name = expect_name();
        e = std::move(a);
      } else if (is_op("[")) {
        ++i_;
        Depth depth(*this, pos);
        e = subscript(std::move(e), pos);
      } else if (is_op("(")) {
        Depth depth(*this, pos);
        auto c = make(ExprKind::kCall, e->pos);
        c->children.push_back(std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr object, Pos pos) {
    ExprPtr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (skip_op(":")) {
        if (++colons > 2) unexpected("']'");
        continue;
      }
      if (parts[colons]) unexpected("':' or ']'");
      parts[colons] = expression(true);
    }
    ++i_;
    auto e = make(colons == 0 ? ExprKind::kItem : ExprKind::kSlice, pos);
    e->children.push_back(std::move(object));
    if (colons == 0) {
      if (!parts[0]) fail(name_, pos, "an empty subscript '[]'");
      e->children.push_back(std::move(parts[0]));
    } else {
      for (auto& p : parts) e->children.push_back(std::move(p));
    }
    return e;
  }

  // `(a, b, key=c)` after the '(' seen by the caller, into e's children and keywords.
  void call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (skip_op(")")) break;
      if (is_op("*") || is_op("**")) fail(name_, peek().pos, "'*' and '**' arguments are not supported");
      if (peek().kind == Tok::kName && is_op("=", 1)) {
        e.keywords.push_back(next().text);
        ++i_;
        e.children.push_back(expression(true));
      } else {
        if (!e.keywords.empty()) fail(name_, peek().pos, "a positional argument after a keyword argument");
        e.children.push_back(expression(true));
      }
    }
  }

  // `| name(args)` and `is [not] name args`, repeated, with postfixes between.
  ExprPtr filters(ExprPtr e) {
    while (true) {
      const Pos pos = peek().pos;
      if (skip_op("|")) {
        auto f = make(ExprKind::kFilter, pos);
        f->name = expect_name();
        while (skip_op(".")) {
          f->name += '.';
          f->name += expect_name();
        }
        f->children.push_back(std::move(e));
        if (is_op("(")) call_args(*f);
        e = std::move(f);
      } else if (skip_name("is")) {
        auto t = make(ExprKind::kTest, pos);
        t->negated = skip_name("not");
        t->name = expect_name();
        t->children.push_back(std::move(e));
        const Token& a = peek();
        if (is_op("(")) {
          call_args(*t);
        } else if ((a.kind == Tok::kName && a.text != "else" && a.text != "or" && a.text != "and") ||
                   a.kind == Tok::kString || a.kind == Tok::kInt || a.kind == Tok::kFloat ||
                   (a.kind == Tok::kOp && (a.text == "[" || a.text == "{"))) {
          t->children.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        auto c = make(ExprKind::kCall, e->pos);
        c->children.push_back(std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  std::string_view name_;
  const ChatLimits& limits_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;  // the loop bodies being parsed (break and continue need one)
  bool has_generation_ = false;
};

}  // namespace

Program parse(const std::vector<Token>& tokens, std::string_view name, const ChatLimits& limits) {
  return Parser(tokens, name, limits).run();
}

}  // namespace zerodp::data::chat
