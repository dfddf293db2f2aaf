"""The chat template renderer (data/chat_template.h) against transformers' apply_chat_template.

For every published template of tests/data/chat_templates and every conversation below (system or not,
multi-turn, add_generation_prompt on and off, Unicode and whitespace at the edges of messages), the text
of `apply_chat_template(messages, tokenize=False, add_generation_prompt=...)` must equal the text that
chat_template_render (tests/tools/chat_template_render.cpp) prints, and the generation blocks' ranges
must equal transformers' generation_indices (the ranges behind return_assistant_tokens_mask), turned
from characters into UTF-8 bytes. A conversation that a template refuses (raise_exception) must be
refused by both. strftime_now reads a fixed clock on both sides.

    chat_template_reference.py CHAT_TEMPLATE_RENDER    (in the venv of scripts/setup/transformers_venv.sh)
"""
import datetime as datetime_module
import json
import pathlib
import subprocess
import sys

import jinja2
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast
from transformers.utils import chat_template_utils

HERE = pathlib.Path(__file__).resolve().parent
TEMPLATES = HERE / "chat_templates"
NOW = (2025, 3, 7, 14, 5, 9)


class FixedClock(datetime_module.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(*NOW)


# transformers' strftime_now calls datetime.now() of this module at render time.
chat_template_utils.datetime = FixedClock

SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer briefly."}
CONVERSATIONS = {
    "one_user": [{"role": "user", "content": "Hello, how are you?"}],
    "system_user": [SYSTEM, {"role": "user", "content": "What is 2 + 2?"}],
    "system_turn": [SYSTEM, {"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4."}],
    "multi_turn": [
        SYSTEM,
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7 is prime."},
        {"role": "user", "content": "Another one?"},
        {"role": "assistant", "content": "11."},
    ],
    "no_system_turns": [
        {"role": "user", "content": "Write a haiku about the sea."},
        {"role": "assistant", "content": "Waves fold into foam\nsalt wind carries gull voices\nthe tide keeps its time"},
        {"role": "user", "content": "Now one about mountains."},
    ],
    "unicode": [
        {"role": "system", "content": "  Réponds en français, s'il te plaît. 🌍\n"},
        {"role": "user", "content": "\u00a0Qu'est-ce que « l'entropie » ? 熵是什么？ Ελληνικά\t"},
        {"role": "assistant", "content": "\n\nL'entropie mesure le désordre — 无序度。 ✅ \u3000"},
        {"role": "user", "content": "Merci 🙏🏽 ! Спасибо."},
        {"role": "assistant", "content": "De rien ! 😊"},
    ],
    "edges": [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "   "},
        {"role": "user", "content": "quotes ' \" \\ and braces {{ }} {% %} <|im_end|>"},
        {"role": "assistant", "content": "line1\r\nline2\n\n"},
    ],
    "thinking": [
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "<think>\n91 = 7 * 13.\n</think>\n\nNo: 91 = 7 × 13."},
        {"role": "user", "content": "And 97?"},
        {"role": "assistant", "content": "<think>97 has no divisor up to 9.</think>Yes, 97 is prime."},
    ],
    # Mistral's template refuses it (raise_exception); the others render it.
    "not_alternating": [{"role": "user", "content": "One."}, {"role": "user", "content": "Two."}],
}
# Template-specific variables (apply_chat_template's kwargs), each tried besides the plain render.
VARIABLES = {
    "qwen3": [{"enable_thinking": False}, {"enable_thinking": True}],
    "llama-3.1-instruct": [{"date_string": "01 Jan 2025"}],
    "llama-3.2-instruct": [{"date_string": "01 Jan 2025"}],
}


def reference(template, tokens, messages, add_generation_prompt, variables):
    """(text, generation byte ranges) as transformers renders, or ("error", message)."""
    kwargs = {k: v for k, v in tokens.items() if v is not None}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]")), **kwargs)
    try:
        text = tok.apply_chat_template(messages, chat_template=template, tokenize=False,
                                       add_generation_prompt=add_generation_prompt, **variables)
        compiled = chat_template_utils._compile_jinja_template(template)
        text2, indices = chat_template_utils._render_with_assistant_indices(
            compiled_template=compiled, messages=messages, tools=None, documents=None,
            add_generation_prompt=add_generation_prompt, **{**tok.special_tokens_map, **variables})
    except jinja2.exceptions.TemplateError as e:
        return "error", str(e)
    assert text == text2, "apply_chat_template and the indices' render differ"
    to_bytes = lambda i: len(text[:i].encode("utf-8"))
    return text, [[to_bytes(b), to_bytes(e)] for b, e in indices]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    manifest = json.loads((TEMPLATES / "templates.json").read_text())
    cases, expected, labels = [], [], []
    for name, tokens in manifest.items():
        template = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
        for conv_name, messages in CONVERSATIONS.items():
            for variables in [{}] + VARIABLES.get(name, []):
                for agp in (False, True):
                    cases.append({"config": {"chat_template": template, **tokens}, "messages": messages,
                                  "add_generation_prompt": agp, "variables": variables, "now": list(NOW)})
                    expected.append(reference(template, tokens, messages, agp, variables))
                    labels.append((name, f"{conv_name} agp={agp} {json.dumps(variables)}"))
    out = subprocess.run([sys.argv[1]], input="".join(json.dumps(c) + "\n" for c in cases),
                         capture_output=True, text=True, encoding="utf-8")
    if out.returncode != 0:
        sys.exit(f"FAIL: chat_template_render exited {out.returncode}: {out.stderr[-2000:]}")
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(results) == len(cases), f"{len(results)} results for {len(cases)} cases"
    totals, failures = {}, []
    for (name, label), want, got in zip(labels, expected, results):
        ok_n, n = totals.get(name, (0, 0))
        if want[0] == "error":
            ok = "error" in got and want[1] in got["error"]
        else:
            ok = got.get("text") == want[0] and got.get("generation") == want[1]
        totals[name] = (ok_n + ok, n + 1)
        if not ok:
            failures.append((name, label, want, got))
    for name, (ok_n, n) in totals.items():
        mine = [w for (nm, _), w in zip(labels, expected) if nm == name]
        gen = sum(1 for w in mine if w[0] != "error" and w[1])
        refused = sum(1 for w in mine if w[0] == "error")
        print(f"{name:32s} {ok_n}/{n} renders equal to transformers ({gen} with generation blocks, {refused} refused by both)")
    for name, label, want, got in failures[:5]:
        print(f"\nMISMATCH {name} {label}\n  transformers: {json.dumps(want, ensure_ascii=False)[:1500]}"
              f"\n  zerodp:       {json.dumps(got, ensure_ascii=False)[:1500]}")
    if failures:
        sys.exit(f"FAIL: {len(failures)} of {len(cases)} renders differ")
    print(f"OK: {len(cases)} renders of {len(totals)} templates equal to transformers {__import__('transformers').__version__}")


if __name__ == "__main__":
    main()
