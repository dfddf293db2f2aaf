// The chat template's evaluator: runs the parsed statements over the render's variables, Jinja's
// scoping (a loop iteration and a macro call are scopes of their own; if and set are not) and its
// Python operators, with the render's bounds, and records the generation blocks.
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "data/chat_template_ast.h"

namespace zerodp::data::chat {

namespace {

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

class Evaluator {
 public:
  Evaluator(std::string_view name, const ChatLimits& limits, const std::tm& now)
      : name_(name), limits_(limits), now_(now) {}

  ChatRendered run(const Program& program, const Json& variables) {
    scopes_.emplace_back();
    const Value root = Value::of(variables);
    for (const auto& [k, v] : variables.items()) scopes_.back()[k] = Value::part(root, v);
    scopes_.emplace_back();  // the template's own names
    out_.emplace_back();
    exec(program.body);
    return {std::move(out_.front()), std::move(generation_)};
  }

 private:
  Site site(Pos pos) const { return Site{name_, pos, limits_, now_}; }
  [[noreturn]] void fail_at(Pos pos, std::string_view what) const { fail(name_, pos, what); }

  void emit(std::string_view s, Pos pos) {
    std::string& out = out_.back();
    if (out.size() + s.size() > limits_.max_output_bytes)
      fail_at(pos, fmt::format("the output would pass {} bytes", limits_.max_output_bytes));
    out += s;
    if (out_.size() == 1) emitted_top_ = true;
  }

  // ---- names ----
  const Value* find(const std::string& name) const {
    for (size_t i = scopes_.size(); i-- > base_;) {
      const auto it = scopes_[i].find(name);
      if (it != scopes_[i].end()) return &it->second;
    }
    for (size_t i = std::min<size_t>(2, base_); i-- > 0;) {
      const auto it = scopes_[i].find(name);
      if (it != scopes_[i].end()) return &it->second;
    }
    return nullptr;
  }
  Value lookup(const std::string& name) const {
    if (const Value* v = find(name)) return *v;
    if (is_builtin(name) || name == "raise_exception") {
      Value v;
      v.kind = Value::Kind::kBuiltin;
      v.name = name;
      return v;
    }
    return Value::undefined(fmt::format("'{}' is undefined", name.substr(0, 60)));
  }
  void assign(const std::string& name, Value v) { scopes_.back()[name] = std::move(v); }

  // ---- statements ----
  Flow exec(const Body& body) {
    for (const auto& s : body) {
      const Flow f = exec(*s);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::kText: emit(s.text, s.pos); break;
      case StmtKind::kPrint: {
        const Value v = eval(*s.exprs[0]);
        emit(v.is_string() ? std::string_view(v.json->get_ref<const std::string&>()) : std::string_view(py_str(v)), s.pos);
        break;
      }
      case StmtKind::kIf:
        for (size_t i = 0; i < s.exprs.size(); ++i)
          if (truthy(eval(*s.exprs[i]))) return exec(s.bodies[i]);
        return exec(s.bodies.back());
      case StmtKind::kFor: loop(s); break;
      case StmtKind::kSet: bind(s.names, eval(*s.exprs[0]), s.pos); break;
      case StmtKind::kSetAttr: {
        const Value* ns = find(s.names[0]);
        if (!ns || ns->kind != Value::Kind::kNamespace)
          fail_at(s.pos, fmt::format("'{}' is not a namespace: only a namespace() takes attributes", s.names[0].substr(0, 60)));
        Value v = eval(*s.exprs[0]);
        for (auto& [k, old] : ns->ns->attributes) {
          if (k == s.names[1]) {
            old = std::move(v);
            return Flow::kNormal;
          }
        }
        ns->ns->attributes.emplace_back(s.names[1], std::move(v));
        break;
      }
      case StmtKind::kSetBlock: assign(s.names[0], Value::of(capture(s.bodies[0]))); break;
      case StmtKind::kMacro: {
        Value v;
        v.kind = Value::Kind::kMacro;
        v.macro = &s;
        assign(s.names[0], std::move(v));
        break;
      }
      case StmtKind::kGeneration: {
        // As transformers' AssistantTracker: the body is rendered, then recorded from the length
        // of the top-level output so far, if anything was output before or a block was recorded.
        const std::string text = capture(s.bodies[0]);
        if (emitted_top_ || !generation_.empty()) {
          const size_t start = out_.front().size();
          generation_.emplace_back(start, start + text.size());
        }
        emit(text, s.pos);
        break;
      }
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  std::string capture(const Body& body) {
    out_.emplace_back();
    exec(body);
    std::string text = std::move(out_.back());
    out_.pop_back();
    return text;
  }

  void bind(const std::vector<std::string>& names, const Value& v, Pos pos) {
    if (names.size() == 1) {
      assign(names[0], v);
      return;
    }
    if (!v.is_json() || !v.json->is_array() || v.json->size() != names.size())
      fail_at(pos, fmt::format("cannot unpack a {} into {} names", type_name(v), names.size()));
    for (size_t i = 0; i < names.size(); ++i) assign(names[i], Value::part(v, (*v.json)[i]));
  }

  std::vector<Value> items_of(const Value& v, Pos pos) const {
    std::vector<Value> items;
    if (v.is_undefined()) return items;
    if (!v.is_json()) fail_at(pos, fmt::format("a {} is not iterable", type_name(v)));
    const Json& j = *v.json;
    if (j.is_array()) {
      items.reserve(j.size());
      for (const Json& x : j) items.push_back(Value::part(v, x));
    } else if (j.is_object()) {
      for (const auto& [k, x] : j.items()) items.push_back(Value::of(k));
    } else if (j.is_string()) {
      const std::string& s = j.get_ref<const std::string&>();
      for (size_t i = 0; i < s.size();) {
        const size_t at = i;
        utf8_next(s, i);
        items.push_back(Value::of(s.substr(at, i - at)));
      }
    } else {
      fail_at(pos, fmt::format("a {} is not iterable", type_name(v)));
    }
    return items;
  }

  void count_iteration(Pos pos) {
    if (++iterations_ > limits_.max_iterations)
      fail_at(pos, fmt::format("more than {} loop iterations", limits_.max_iterations));
  }

  void loop(const Stmt& s) {
    auto state = std::make_shared<LoopState>();
    std::vector<Value> all = items_of(eval(*s.exprs[0]), s.exprs[0]->pos);
    if (s.exprs[1]) {
      for (Value& item : all) {
        count_iteration(s.pos);
        scopes_.emplace_back();
        bind(s.names, item, s.pos);
        const bool keep = truthy(eval(*s.exprs[1]));
        scopes_.pop_back();
        if (keep) state->items.push_back(std::move(item));
      }
    } else {
      state->items = std::move(all);
    }
    if (state->items.empty()) {
      exec(s.bodies[1]);
      return;
    }
    Value loop_value;
    loop_value.kind = Value::Kind::kLoop;
    loop_value.loop = state;
    for (size_t i = 0; i < state->items.size(); ++i) {
      count_iteration(s.pos);
      state->index0 = i;
      scopes_.emplace_back();
      bind(s.names, state->items[i], s.pos);
      assign("loop", loop_value);
      const Flow f = exec(s.bodies[0]);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
  }

  // ---- expressions ----
  Args args_of(const Expr& e, size_t first) {
    Args a;
    const size_t n_kw = e.keywords.size();
    const size_t n_pos = e.children.size() - first - n_kw;
    for (size_t i = 0; i < n_pos; ++i) a.positional.push_back(eval(*e.children[first + i]));
    for (size_t i = 0; i < n_kw; ++i) a.keyword.emplace_back(e.keywords[i], eval(*e.children[first + n_pos + i]));
    return a;
  }

  Value call_macro(const Stmt& m, const Args& a, Pos pos) {
    if (call_depth_ >= limits_.max_call_depth)
      fail_at(pos, fmt::format("macro calls nested deeper than {}", limits_.max_call_depth));
    const size_t n_params = m.names.size() - 1;
    if (a.positional.size() > n_params)
      fail_at(pos, fmt::format("macro '{}' takes {} arguments, got {}", m.names[0], n_params, a.positional.size()));
    const size_t saved_base = base_;
    scopes_.emplace_back();
    base_ = scopes_.size() - 1;
    ++call_depth_;
    for (size_t i = 0; i < n_params; ++i) {
      const Value* given = a.get(i, m.names[i + 1]);
      assign(m.names[i + 1], given ? *given : m.exprs[i] ? eval(*m.exprs[i]) : Value::undefined(
          fmt::format("'{}' is undefined", m.names[i + 1])));
    }
    for (const auto& [k, v] : a.keyword) {
      bool known = false;
      for (size_t i = 1; i < m.names.size(); ++i) known = known || m.names[i] == k;
      if (!known) fail_at(pos, fmt::format("macro '{}' has no argument '{}'", m.names[0], k.substr(0, 60)));
    }
    std::string text = capture(m.bodies[0]);
    --call_depth_;
    scopes_.pop_back();
    base_ = saved_base;
    return Value::of(std::move(text));
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.children[0];
    if (callee.kind == ExprKind::kAttr) {
      const Value object = eval(*callee.children[0]);
      if (object.is_undefined()) fail_at(callee.pos, object.name);
      Args a = args_of(e, 1);
      Value result;
      if (object.is_json() && call_method(site(e.pos), object, callee.name, a, result)) return result;
      if (object.kind == Value::Kind::kLoop && callee.name == "cycle") {
        if (a.positional.empty()) fail_at(e.pos, "loop.cycle() needs at least one value");
        return a.positional[object.loop->index0 % a.positional.size()];
      }
      const Value f = attribute(object, callee.name, callee.pos);
      if (f.kind == Value::Kind::kMacro) return call_macro(*f.macro, a, e.pos);
      fail_at(e.pos, fmt::format("a {} has no method '{}'", type_name(object), callee.name.substr(0, 60)));
    }
    const Value f = eval(callee);
    Args a = args_of(e, 1);
    if (f.kind == Value::Kind::kMacro) return call_macro(*f.macro, a, e.pos);
    if (f.kind == Value::Kind::kBuiltin) {
      if (f.name == "raise_exception") {
        const Value* msg = a.get(0, "message");
        const std::string text = msg ? py_str(*msg) : std::string();
        fail_at(e.pos, fmt::format("the template raised an error: {}", text.substr(0, 300)));
      }
      return call_builtin(site(e.pos), f.name, a);
    }
    if (f.is_undefined()) fail_at(callee.pos, f.name);
    fail_at(e.pos, fmt::format("a {} is not callable", type_name(f)));
  }

  Value attribute(const Value& object, const std::string& name, Pos pos) const {
    switch (object.kind) {
      case Value::Kind::kUndefined: fail_at(pos, object.name);
      case Value::Kind::kNamespace:
        for (const auto& [k, v] : object.ns->attributes)
          if (k == name) return v;
        return Value::undefined(fmt::format("the namespace has no attribute '{}'", name.substr(0, 60)));
      case Value::Kind::kLoop: {
        const LoopState& l = *object.loop;
        const size_t n = l.items.size(), i = l.index0;
        if (name == "index0") return Value::of(i);
        if (name == "index") return Value::of(i + 1);
        if (name == "revindex0") return Value::of(n - i - 1);
        if (name == "revindex") return Value::of(n - i);
        if (name == "first") return Value::of(i == 0);
        if (name == "last") return Value::of(i + 1 == n);
        if (name == "length") return Value::of(n);
        if (name == "depth") return Value::of(1);
        if (name == "depth0") return Value::of(0);
        if (name == "previtem") return i > 0 ? l.items[i - 1] : Value::undefined("there is no previous item");
        if (name == "nextitem") return i + 1 < n ? l.items[i + 1] : Value::undefined("there is no next item");
        return Value::undefined(fmt::format("the loop has no attribute '{}'", name.substr(0, 60)));
      }
      case Value::Kind::kJson:
        if (object.json->is_object()) {
          const auto it = object.json->find(name);
          if (it != object.json->end()) return Value::part(object, *it);
          return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name.substr(0, 60)));
        }
        return Value::undefined(fmt::format("'{}' object has no attribute '{}'", type_name(object), name.substr(0, 60)));
      default: return Value::undefined(fmt::format("a {} has no attribute '{}'", type_name(object), name.substr(0, 60)));
    }
  }

  Value item(const Value& object, const Value& key, Pos pos) const {
    if (object.is_undefined()) fail_at(pos, object.name);
    if (key.is_string() && !(object.is_json() && object.json->is_object())) return attribute(object, key.json->get<std::string>(), pos);
    if (!object.is_json()) return Value::undefined(fmt::format("a {} cannot be indexed", type_name(object)));
    const Json& j = *object.json;
    if (j.is_object()) {
      if (!key.is_string()) return Value::undefined("a dict key that is not a string");
      const auto it = j.find(key.json->get_ref<const std::string&>());
      if (it != j.end()) return Value::part(object, *it);
      return Value::undefined(fmt::format("'dict object' has no attribute '{}'", key.json->get<std::string>().substr(0, 60)));
    }
    if (!key.is_json() || !key.json->is_number_integer())
      fail_at(pos, fmt::format("a {} index must be an integer, not {}", type_name(object), type_name(key)));
    int64_t i = key.json->get<int64_t>();
    if (j.is_array()) {
      const auto n = static_cast<int64_t>(j.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined(fmt::format("list index {} out of range", key.json->get<int64_t>()));
      return Value::part(object, j[static_cast<size_t>(i)]);
    }
    if (j.is_string()) {
      const std::string& s = j.get_ref<const std::string&>();
      const auto n = static_cast<int64_t>(utf8_length(s));
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("string index out of range");
      const size_t b = utf8_offset(s, static_cast<size_t>(i));
      size_t e = b;
      utf8_next(s, e);
      return Value::of(s.substr(b, e - b));
    }
    return Value::undefined(fmt::format("a {} cannot be indexed", type_name(object)));
  }

  Value slice(const Expr& e) {
    const Value object = eval(*e.children[0]);
    if (object.is_undefined()) fail_at(e.pos, object.name);
    int64_t bound[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!e.children[1 + k]) continue;
      const Value v = eval(*e.children[1 + k]);
      if (v.is_json() && v.json->is_null()) continue;
      if (!v.is_json() || !v.json->is_number_integer()) fail_at(e.pos, "slice bounds must be integers or none");
      bound[k] = v.json->get<int64_t>();
      given[k] = true;
    }
    if (!object.is_json() || !(object.json->is_array() || object.json->is_string()))
      fail_at(e.pos, fmt::format("a {} cannot be sliced", type_name(object)));
    const bool is_string = object.json->is_string();
    const std::string* s = is_string ? &object.json->get_ref<const std::string&>() : nullptr;
    // Python's slice.indices, then the chosen elements.
    const int64_t n = is_string ? static_cast<int64_t>(utf8_length(*s)) : static_cast<int64_t>(object.json->size());
    const int64_t step = bound[2];
    if (step == 0) fail_at(e.pos, "a slice step cannot be zero");
    auto adjust = [&](int64_t v, bool g, int64_t dflt) {
      if (!g) return dflt;
      if (v < 0) v += n;
      if (step > 0) return std::clamp<int64_t>(v, 0, n);
      return std::clamp<int64_t>(v, -1, n - 1);
    };
    const int64_t start = adjust(bound[0], given[0], step > 0 ? 0 : n - 1);
    const int64_t stop = adjust(bound[1], given[1], step > 0 ? n : -1);
    std::vector<size_t> picked;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picked.push_back(static_cast<size_t>(i));
    if (!is_string) {
      Json out = Json::array();
      for (size_t i : picked) out.push_back((*object.json)[i]);
      return Value::of(std::move(out));
    }
    std::vector<std::pair<size_t, size_t>> cps;
    for (size_t i = 0; i < s->size();) {
      const size_t at = i;
      utf8_next(*s, i);
      cps.emplace_back(at, i - at);
    }
    std::string out;
    for (size_t i : picked) out.append(*s, cps[i].first, cps[i].second);
    return Value::of(std::move(out));
  }

  struct Depth {
    Evaluator& ev;
    Depth(Evaluator& e, Pos pos) : ev(e) {
      if (++ev.eval_depth_ > 4 * ev.limits_.max_nesting + 64) ev.fail_at(pos, "expressions evaluated too deep");
    }
    ~Depth() { --ev.eval_depth_; }
  };

  Value eval(const Expr& e) {
    Depth depth(*this, e.pos);
    switch (e.kind) {
      case ExprKind::kLiteral: {
        Value v;
        v.kind = Value::Kind::kJson;
        v.json = e.literal;
        return v;
      }
      case ExprKind::kName: return lookup(e.name);
      case ExprKind::kAttr: return attribute(eval(*e.children[0]), e.name, e.pos);
      case ExprKind::kItem: {
        const Value object = eval(*e.children[0]);
        return item(object, eval(*e.children[1]), e.pos);
      }
      case ExprKind::kSlice: return slice(e);
      case ExprKind::kCall: return call(e);
      case ExprKind::kFilter: {
        const Value object = eval(*e.children[0]);
        return apply_filter(site(e.pos), e.name, object, args_of(e, 1));
      }
      case ExprKind::kTest: {
        const Value object = eval(*e.children[0]);
        return Value::of(apply_test(site(e.pos), e.name, object, args_of(e, 1)) != e.negated);
      }
      case ExprKind::kUnary: return unary_op(site(e.pos), e.op, eval(*e.children[0]));
      case ExprKind::kBinary: {
        const Value a = eval(*e.children[0]);
        return binary_op(site(e.pos), e.op, a, eval(*e.children[1]));
      }
      case ExprKind::kCompare: {
        Value left = eval(*e.children[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.children[i + 1]);
          if (!compare_op(site(e.pos), e.ops[i], left, right)) return Value::of(false);
          left = std::move(right);
        }
        return Value::of(true);
      }
      case ExprKind::kAnd: {
        Value a = eval(*e.children[0]);
        return truthy(a) ? eval(*e.children[1]) : a;
      }
      case ExprKind::kOr: {
        Value a = eval(*e.children[0]);
        return truthy(a) ? a : eval(*e.children[1]);
      }
      case ExprKind::kNot: return Value::of(!truthy(eval(*e.children[0])));
      case ExprKind::kCond:
        if (truthy(eval(*e.children[1]))) return eval(*e.children[0]);
        return e.children[2] ? eval(*e.children[2]) : Value::undefined("the condition was false and there is no else");
      case ExprKind::kList: {
        Json out = Json::array();
        for (const auto& c : e.children) {
          const Value v = eval(*c);
          if (!v.is_json()) fail_at(c->pos, fmt::format("a list cannot hold a {}", type_name(v)));
          out.push_back(*v.json);
        }
        return Value::of(std::move(out));
      }
      case ExprKind::kDict: {
        Json out = Json::object();
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          const Value k = eval(*e.children[i]);
          const Value v = eval(*e.children[i + 1]);
          if (!k.is_string()) fail_at(e.children[i]->pos, fmt::format("a dict key must be a string, not {}", type_name(k)));
          if (!v.is_json()) fail_at(e.children[i + 1]->pos, fmt::format("a dict cannot hold a {}", type_name(v)));
          out[k.json->get<std::string>()] = *v.json;
        }
        return Value::of(std::move(out));
      }
    }
    fail_at(e.pos, "an unknown expression");
  }

  std::string_view name_;
  const ChatLimits& limits_;
  const std::tm& now_;
  std::vector<std::unordered_map<std::string, Value>> scopes_;
  size_t base_ = 0;  // scopes below this (but the first two) are hidden: a macro call's
  std::vector<std::string> out_;
  std::vector<std::pair<size_t, size_t>> generation_;
  bool emitted_top_ = false;
  size_t iterations_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
};

}  // namespace

ChatRendered evaluate(const Program& program, std::string_view name, const ChatLimits& limits, const Json& variables,
                      const std::tm& now) {
  return Evaluator(name, limits, now).run(program, variables);
}

}  // namespace zerodp::data::chat
