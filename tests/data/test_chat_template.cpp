// data/chat_template.h: the Jinja subset feature by feature (whitespace control, statements, scoping,
// expressions, filters, tests, methods, generation ranges), tokenizer_config.json's forms, and the
// errors and bounds. Whole published templates against transformers: chat_template_reference.py.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "data/chat_template.h"

namespace zerodp::data {
namespace {

using nlohmann::ordered_json;

ordered_json chat() {
  return ordered_json::parse(R"([{"role": "system", "content": " Be brief. "},
                                 {"role": "user", "content": "Hi"},
                                 {"role": "assistant", "content": "Hello!"}])");
}

ChatRendered render_full(const std::string& source, const ordered_json& messages = chat(), ChatRenderOptions o = {}) {
  return ChatTemplate(source, "test").render(messages, o);
}

std::string render(const std::string& source, const ordered_json& messages = chat(), ChatRenderOptions o = {}) {
  return render_full(source, messages, o).text;
}

std::string error_of(const std::string& source, const ordered_json& messages = chat(), const ChatLimits& limits = {}) {
  try {
    ChatTemplate(source, "test", limits).render(messages);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ChatTemplate, WhitespaceControlAsTransformersSetsIt) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before one goes.
  EXPECT_EQ(render("{% if true %}\n  a\n{% endif %}\nb"), "  a\nb");
  EXPECT_EQ(render("x\n    {% if true %}y{% endif %}"), "x\ny");
  // `-` strips all whitespace on its side; `+` keeps it; expressions are not trimmed.
  EXPECT_EQ(render("a  \n {{- 'b' -}} \n c"), "abc");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}"), "a\nb");
  EXPECT_EQ(render("a{# note #}\nb {#- x -#}  c"), "abc");
  // One final newline is dropped, as Jinja's keep_trailing_newline=False does; \r\n reads as \n.
  EXPECT_EQ(render("a\r\nb\n"), "a\nb");
  EXPECT_EQ(render("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(ChatTemplate, StatementsAndScopes) {
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.length }}{{ loop.revindex }},{% endfor %}"),
            "01TrueFalse33,12FalseFalse32,23FalseTrue31,");
  EXPECT_EQ(render("{% if false %}a{% elif 1 %}b{% else %}c{% endif %}"), "b");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render("{% for m in messages if m.role != 'system' %}{{ m.role }}{{ loop.index }}{% endfor %}"),
            "user1assistant2");
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{% if i is odd %}{% continue %}"
                   "{% endif %}{{ i }}{% endfor %}"),
            "02");
  // `set` in a loop stays in that iteration; in an if it reaches the enclosing scope.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 5 %}{{ x }}{% endfor %}{{ x }}"), "15151");
  EXPECT_EQ(render("{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}"),
            "3");
  EXPECT_EQ(render("{% set a, b = [1, 'two'] %}{{ b }}{{ a }}"), "two1");
  EXPECT_EQ(render("{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]"), "[x2]");
  EXPECT_EQ(render("{% macro turn(role, text='?') %}<{{ role }}:{{ text }}>{% endmacro %}{{ turn('u') }}{{ turn('a', text='b') }}"),
            "<u:?><a:b>");
  EXPECT_EQ(render("{% set messages = messages[1:] %}{{ messages | length }}"), "2");
}

TEST(ChatTemplate, ExpressionsFollowPython) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }}"),
            "3 -4 2 3.5 2.0 1024 7");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }}"),
            "a1None abab [1, 2] 0.30000000000000004 1e+20 1e-05");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 2 not in [1] }} {{ 'role' in messages[0] }} {{ 1 == 1.0 }}"),
            "True True True True True");
  EXPECT_EQ(render("{{ none or 'x' }} {{ 0 and 1 }} {{ not [] }} {{ 'y' if false else 'n' }} {{ 'y' if false }}"),
            "x 0 True n ");
  EXPECT_EQ(render("{{ messages[-1]['content'] }} {{ messages[0].role }} {{ 'héllo'[1] }} {{ 'héllo'[1:3] }}"
                   " {{ 'abc'[::-1] }} {{ [1, 2, 3][::2] }}"),
            "Hello! system é él cba [1, 3]");
  EXPECT_EQ(render("{{ {'a': [1, true, none], 'b': 'it\\'s'} }}"), "{'a': [1, True, None], 'b': \"it's\"}");
  EXPECT_EQ(render("{{ 'a\\tb\\u00e9\\n' }}"), "a\tbé\n");
}

TEST(ChatTemplate, FiltersTestsAndMethods) {
  EXPECT_EQ(render("{{ messages[0].content | trim }}|{{ '\\u00a0x\\u3000' | trim }}|{{ 'xxaxx' | trim('x') }}"),
            "Be brief.|x|a");
  EXPECT_EQ(render("{{ messages | length }} {{ 'héllo' | length }} {{ 'Ab' | upper }}{{ 'Ab' | lower }}"
                   " {{ 'hello world' | title }} {{ 'hELLO' | capitalize }}"),
            "3 5 ABab Hello World Hello");
  EXPECT_EQ(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}"
                   " {{ messages | rejectattr('role', 'eq', 'user') | list | length }} {{ [3, 1, 2] | sort | first }}"
                   " {{ [1, 1, 2] | unique | list }} {{ [1, 2] | reverse | list }} {{ undefined_x | default('d') }}"),
            "Hi 2 1 [1, 2] [2, 1] d");
  EXPECT_EQ(render("{{ {'b': 'é', 'a': [1, 2.5, none]} | tojson }}|{{ {'a': {'b': []}} | tojson(indent=2) }}"
                   "|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true, separators=[',', ':']) }}"),
            "{\"b\": \"é\", \"a\": [1, 2.5, null]}|{\n  \"a\": {\n    \"b\": []\n  }\n}|{\"a\":2,\"b\":1}");
  EXPECT_EQ(render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ 1 is integer }} {{ 1.0 is float }}"
                   " {{ {} is mapping }} {{ [] is iterable }} {{ 4 is divisibleby 2 }} {{ 1 is not number }}"),
            "False True True True True True True True False");
  EXPECT_EQ(render("{{ ' a b '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'x<t>'.startswith('x') }}"
                   "|{{ 'abc'.endswith(('z', 'c')) }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ 'aXbX'.replace('X', '-') }}"
                   "|{{ '-'.join(['a', 'b']) }}|{{ {'k': 1}.get('k') }}{{ {'k': 1}.get('z', 0) }}|{{ 'héé'.find('é') }}"),
            "a b|['a', 'b', '', 'c']|['a', 'b']|True|True|x\n|a-b-|a-b|10|1");
  EXPECT_EQ(render("{{ 'a\\nb' | indent(2) }}|{{ ['a', 'b'] | join }}|{{ '5' | int + 1 }}|{{ [1, 2, 3] | sum }}"),
            "a\n  b|ab|6|6");
}

TEST(ChatTemplate, GlobalsAndTheClock) {
  ChatRenderOptions o;
  o.now = std::tm{};
  o.now->tm_year = 2024 - 1900;
  o.now->tm_mon = 6;
  o.now->tm_mday = 26;
  o.variables = {{"bos_token", "<s>"}, {"flag", true}};
  o.add_generation_prompt = true;
  EXPECT_EQ(render("{{ bos_token }}{{ strftime_now('%d %b %Y') }} {{ flag }} {{ add_generation_prompt }}"
                   " {{ tools is none }} {{ strftime_now is defined }}",
                   chat(), o),
            "<s>26 Jul 2024 True True True True");
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ dict(a=1) }}"), "[0, 1, 2] [1, 3, 5] {'a': 1}");
}

TEST(ChatTemplate, GenerationRangesAreTransformers) {
  const std::string t =
      "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}</s>"
      "{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}";
  const ordered_json msgs = ordered_json::parse(R"([{"role": "user", "content": "é?"},
      {"role": "assistant", "content": "ça"}, {"role": "user", "content": "x"}, {"role": "assistant", "content": ""}])");
  const ChatRendered r = render_full(t, msgs);
  ASSERT_EQ(r.text, "<user>é?<assistant>ça</s><user>x<assistant></s>");
  ASSERT_EQ(r.generation.size(), 2u);
  EXPECT_EQ(r.text.substr(r.generation[0].first, r.generation[0].second - r.generation[0].first), "ça</s>");
  EXPECT_EQ(r.text.substr(r.generation[1].first, r.generation[1].second - r.generation[1].first), "</s>");
  EXPECT_TRUE(ChatTemplate(t, "test").has_generation());
  // Before any output transformers' tracker is inactive: a block first in the template is not recorded.
  EXPECT_EQ(render_full("{% generation %}a{% endgeneration %}b{% generation %}c{% endgeneration %}").generation,
            (std::vector<std::pair<size_t, size_t>>{{2, 3}}));
  EXPECT_TRUE(render_full("{% generation %}a{% endgeneration %}").generation.empty());
  EXPECT_EQ(render_full("x{% generation %}a{% endgeneration %}b{% generation %}c{% endgeneration %}").generation,
            (std::vector<std::pair<size_t, size_t>>{{1, 2}, {3, 4}}));
}

TEST(ChatTemplate, TokenizerConfigForms) {
  nlohmann::json config = {{"chat_template", "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ unk_token }}"},
                           {"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
                           {"eos_token", "</s>"},
                           {"pad_token", nullptr},
                           {"unk_token", "<unk>"}};
  ChatTemplate t = ChatTemplate::from_tokenizer_config(config, "tokenizer_config.json");
  EXPECT_EQ(t.render(chat()).text, "<s>|</s>|False|<unk>");
  config["chat_template"] = nlohmann::json::array({{{"name", "default"}, {"template", "D"}},
                                                   {{"name", "tool_use"}, {"template", "T"}}});
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(config, "c.json").render(chat()).text, "D");
  EXPECT_EQ(ChatTemplate::from_tokenizer_config(config, "c.json", "tool_use").render(chat()).text, "T");
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(config, "c.json", "rag"), UsageError);
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(nlohmann::json::object(), "c.json"), UsageError);
  config["eos_token"] = 5;
  EXPECT_THROW(ChatTemplate::from_tokenizer_config(config, "c.json"), UsageError);
}

TEST(ChatTemplate, ErrorsNameTheLineAndColumn) {
  EXPECT_EQ(error_of("a\n{% if x %}b"), "test line 2, column 4: this block is not closed: '{% endif %}' is missing");
  EXPECT_EQ(error_of("{{ 1 +  }}"), "test line 1, column 9: expected an expression, got '}}'");
  EXPECT_EQ(error_of("{% frobnicate %}"), "test line 1, column 4: unknown or unsupported tag 'frobnicate'");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "test line 1, column 8: unsupported operand types for +: 'str' and 'int'");
  EXPECT_EQ(error_of("\n  {{ raise_exception('Roles must alternate') }}"),
            "test line 2, column 6: the template raised an error: Roles must alternate");
  EXPECT_EQ(error_of("{{ x.y }}"), "test line 1, column 5: 'x' is undefined");
  EXPECT_EQ(error_of("{{ messages | frob }}"), "test line 1, column 13: unknown or unsupported filter 'frob'");
  EXPECT_EQ(error_of("{{ 'unclosed }}"), "test line 1, column 4: a string is not closed");
  EXPECT_EQ(error_of("{% break %}"), "test line 1, column 4: '{% break %}' outside a loop");
  // A value is described by its type, never echoed.
  const std::string secret(1000, 's');
  const ordered_json m = ordered_json::array({{{"role", "user"}, {"content", secret}}});
  const std::string e = error_of("{{ messages[0].content + 1 }}", m);
  EXPECT_EQ(e.find("sss"), std::string::npos) << e;
}

TEST(ChatTemplate, BoundsComeBeforeTheWork) {
  ChatLimits small;
  small.max_output_bytes = 1000;
  small.max_iterations = 100;
  small.max_nesting = 20;
  small.max_call_depth = 5;
  small.max_source_bytes = 100;
  EXPECT_NE(error_of("{{ 'x' * 1000000000000 }}", chat(), small).find("would pass 1000 bytes"), std::string::npos);
  EXPECT_NE(error_of("{% for i in range(1000000000000) %}{% endfor %}", chat(), small).find("iterations"), std::string::npos);
  EXPECT_NE(error_of("{% for i in range(50) %}{% for j in range(50) %}{% endfor %}{% endfor %}", chat(), small)
                .find("more than 100 loop iterations"),
            std::string::npos);
  EXPECT_NE(error_of("{% for i in range(90) %}{{ 'abcdefghijklmn' }}{% endfor %}", chat(), small).find("output would pass"),
            std::string::npos);
  std::string deep = "{{";
  deep.append(30, '(');
  deep += '1';
  deep.append(30, ')');
  deep += "}}";
  EXPECT_NE(error_of(deep, chat(), small).find("nested deeper"), std::string::npos);
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", chat(), small).find("nested deeper than 5"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(200, 'a'), chat(), small).find("more than the 100 allowed"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
}

}  // namespace
}  // namespace zerodp::data
