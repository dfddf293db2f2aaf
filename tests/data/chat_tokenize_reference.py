"""`zerodp tokenize --sft` on {"messages"} lines against transformers' apply_chat_template, and the token
spans it masks with against the `tokenizers` library's offsets (docs/reference/files.md#instruction-data).

    chat_tokenize_reference.py ZERODP TOKEN_SPANS   (tests/pylib on PYTHONPATH; re-runs itself in the venv
                                                     of scripts/setup/transformers_venv.sh, made on first
                                                     use, and exits 77, skipped, only when that venv
                                                     cannot be made)

Tokenizers are trained on data/tinyshakespeare.txt in the shapes of the models whose published templates
are tested (tests/data/chat_templates), each with the template's special tokens as added tokens:
Llama 3's (byte-level, its regex, <|begin_of_text|> ... <|eot_id|>), Qwen 2.5's (byte-level with NFC,
<|im_start|>, <|im_end|>, <tool_call>), SmolLM2's (GPT-2's shape, <|im_start|>, <|im_end|>) and
Mistral's (SentencePiece-style: Metaspace, byte fallback, [INST], [/INST]).

spans   Tokenizer::encode_with_spans (tests/tools/token_spans.cpp) against encode(text,
        add_special_tokens=False): the same ids, and each span equal to the token's offsets turned from
        characters into UTF-8 bytes, on multilingual texts and rendered conversations, for those four and
        for Llama 2's shape (Prepend and Replace normalizer), Metaspace's other schemes, ByteLevel's
        prefix space, a post-processor's trim_offsets (with and without add_prefix_space), added tokens
        with lstrip and rstrip, and a Lowercase normalizer with normalized added tokens. Texts a Unicode
        form changes are compared by ids only: zerodp's spans cover a changed stretch as a whole
        (tokenizer.h).
chat    for each template, the conversations below written as JSON Lines, `zerodp tokenize --sft` on them,
        and for each example: its ids equal apply_chat_template(messages, tokenize=True)'s; with
        {% generation %} blocks (llama-3.2-instruct-generation, smollm2-instruct-generation), its targets
        equal return_assistant_tokens_mask's (the first token, which starts the example, never one);
        without them (llama-3.1-instruct, llama-3.2-instruct, qwen2.5-instruct, smollm2-instruct,
        mistral), zerodp's fallback (each assistant content and the end-of-turn token after it) equals
        the mask transformers gives the same template with that content and end-of-turn in a generation
        block. strftime_now reads the clock on both sides: a run that crosses midnight is run again.
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile
import unicodedata

from zdptest import harness as zt


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def need_transformers():
    """Makes this process one that imports transformers (a re-run in the venv of
    scripts/setup/transformers_venv.sh); exit 77 when the venv cannot be made (it needs /usr/bin/python3
    with Debian's torch, the script says so)."""
    from zdptest import transformers_env
    try:
        transformers_env.ensure_transformers()  # returns here, or replaces this process, or exits with a message
    except SystemExit as e:
        if os.environ.get(transformers_env.REEXEC_ENV) == "1":
            fail(f"the transformers venv cannot import transformers: {e.code}")
        print(f"SKIPPED: the transformers venv could not be made: {e.code}")
        sys.exit(77)


if __name__ == "__main__":
    need_transformers()

from tokenizers import AddedToken, normalizers, pre_tokenizers, processors  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from zdptest import instruction_ref, train_shapes, train_tokenizers, unseen_texts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

TEMPLATES = os.path.join(HERE, "chat_templates")
VOCAB = 1200

SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer briefly."}
CONVERSATIONS = [
    [{"role": "user", "content": "Hello, how are you?"}, {"role": "assistant", "content": "Well, thank you."}],
    [SYSTEM, {"role": "user", "content": "Name a prime."}, {"role": "assistant", "content": "7 is prime."},
     {"role": "user", "content": "Another one?"}, {"role": "assistant", "content": "11."}],
    [{"role": "user", "content": "Write a haiku about the sea."},
     {"role": "assistant", "content": "Waves fold into foam\nsalt wind carries gull voices\nthe tide keeps its time"},
     {"role": "user", "content": "Now one about mountains."},
     {"role": "assistant", "content": "Stone shoulders rise high\n"}],
    [{"role": "system", "content": "  Réponds en français, s'il te plaît. 🌍\n"},
     {"role": "user", "content": "\u00a0Qu'est-ce que « l'entropie » ? 熵是什么？ Ελληνικά\t"},
     {"role": "assistant", "content": "\n\nL'entropie mesure le désordre — 无序度。 ✅ \u3000"},
     {"role": "user", "content": "Merci 🙏🏽 ! Спасибо."},
     {"role": "assistant", "content": "De rien ! 😊 مرحبا नमस्ते 한국어"}],
    # an answer that the question and the template's words contain; the same answer twice
    [{"role": "user", "content": "Say yes or assistant."}, {"role": "assistant", "content": "yes"},
     {"role": "user", "content": "yes"}, {"role": "assistant", "content": "assistant"},
     {"role": "user", "content": "Again?"}, {"role": "assistant", "content": "yes"}],
    # decomposed characters (NFC composes them) inside, digits, code, whitespace at the edges
    [{"role": "user", "content": "Cafe\u0301 or the\u0301?"},
     {"role": "assistant", "content": "  Both: re\u0301sume\u0301 costs 1234567 and `f(x) = x ** 2`.  "},
     {"role": "user", "content": "Thanks\r\n"}, {"role": "assistant", "content": "line1\r\nline2\n\n"}],
    # no assistant message: no target
    [SYSTEM, {"role": "user", "content": "Only a question."}],
]

# tokenizer shape: the special tokens it gets as added tokens (its templates' and its model's)
SHAPES = {
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
               "<|eom_id|>", "<|python_tag|>"],
    "qwen25": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "smollm2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "mistral": ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"],
}
# template: (shape, the template that marks what zerodp's fallback should, or None when it has its own
# generation blocks)
CHAT_CASES = {
    "llama-3.1-instruct": ("llama3", "llama-3.1-instruct+generation"),
    "llama-3.2-instruct": ("llama3", "llama-3.2-instruct-generation"),
    "llama-3.2-instruct-generation": ("llama3", None),
    "qwen2.5-instruct": ("qwen25", "qwen2.5-instruct+generation"),
    "smollm2-instruct": ("smollm2", "smollm2-instruct-generation"),
    "smollm2-instruct-generation": ("smollm2", None),
    "mistral-7b-instruct-v0.3": ("mistral", "mistral-7b-instruct-v0.3+generation"),
}
# "+generation": the published template with each assistant message's content (as the template writes
# it) and the end-of-turn after it put in a generation block, by these edits.
GENERATION_EDITS = {
    "llama-3.1-instruct": (
        "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
        "'<|eot_id|>' }}",
        "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}{%- if message['role'] == "
        "'assistant' %}{%- generation %}{{- message['content'] | trim + '<|eot_id|>' }}{%- endgeneration %}{%- else "
        "%}{{- message['content'] | trim + '<|eot_id|>' }}{%- endif %}"),
    "qwen2.5-instruct": (
        "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}",
        "{%- if message.role == 'assistant' %}{{- '<|im_start|>' + message.role + '\\n' }}{%- generation %}{{- "
        "message.content + '<|im_end|>' }}{%- endgeneration %}{{- '\\n' }}{%- else %}{{- '<|im_start|>' + "
        "message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}"),
    "mistral-7b-instruct-v0.3": (
        "{{- \" \" + message[\"content\"]|trim + eos_token}}",
        "{{- \" \" }}{%- generation %}{{- message[\"content\"]|trim + eos_token}}{%- endgeneration %}"),
}


class Mismatch(Exception):
    """A chat case that differs from transformers (run again when the day changed meanwhile)."""


def template_text(name):
    if name.endswith("+generation"):
        base = name[: -len("+generation")]
        old, new = GENERATION_EDITS[base]
        text = template_text(base)
        if text.count(old) != 1:
            fail(f"{base}: the line to put in a generation block is not in the template once")
        return text.replace(old, new)
    with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
        return f.read()


def special_tokens(name):
    with open(os.path.join(TEMPLATES, "templates.json"), encoding="utf-8") as f:
        return {k: v for k, v in json.load(f)[name.split("+")[0]].items() if v is not None}


def train(shape, corpus):
    if shape == "llama3":
        t = train_tokenizers.train_llama3([corpus], VOCAB)
        t.post_processor = processors.Sequence([
            processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
            processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)])])
    elif shape == "qwen25":
        t = train_shapes.train_qwen25([corpus], VOCAB)
        t.add_tokens([AddedToken("<tool_call>", special=False, normalized=False),
                      AddedToken("</tool_call>", special=False, normalized=False)])
    elif shape == "smollm2":
        t = train_tokenizers.train_gpt2([corpus], VOCAB)
        t.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    elif shape == "mistral":
        t = train_shapes.train_mistral([corpus], VOCAB)
    else:
        return variant(shape, corpus)
    t.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SHAPES[shape]])
    return t


def variant(name, corpus):
    """The tokenizers of the spans part only."""
    if name == "llama2":
        return train_shapes.train_llama2([corpus], 600)
    if name in ("metaspace_always", "metaspace_never"):
        return train_shapes.train_mistral([corpus], 600, name.split("_")[1], name == "metaspace_always")
    if name == "qwen25_lower":  # a normalizer that changes characters one by one; normalized added tokens
        t = train_shapes.train_qwen25([corpus], 600, normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()]))
        t.add_tokens([AddedToken("<Tag>", normalized=True, lstrip=True), AddedToken("Word", normalized=True)])
        t.add_special_tokens([AddedToken("<|im_end|>", special=True, normalized=False)])
        return t
    t = train_tokenizers.train_gpt2([corpus], 600)
    if name == "gpt2_prefix_space":
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    elif name in ("gpt2_trim", "gpt2_trim_prefix"):
        t.post_processor = processors.ByteLevel(trim_offsets=True, add_prefix_space=name == "gpt2_trim_prefix")
        t.add_special_tokens([AddedToken(" <sp> ", special=True, normalized=False)])
    elif name == "gpt2_strip":
        t.add_special_tokens([AddedToken("<|im_end|>", special=True, lstrip=True, rstrip=True, normalized=False)])
        t.add_tokens([AddedToken("<tag>", lstrip=True, rstrip=True), AddedToken("word", single_word=True)])
    return t


def byte_offsets(text, offsets):
    """Character offsets as UTF-8 byte offsets of `text`."""
    at = [0]
    for ch in text:
        at.append(at[-1] + len(ch.encode("utf-8")))
    return [[at[b], at[e]] for b, e in offsets]


def spans_part(token_spans, tmp, corpus, chat_texts):
    names = list(SHAPES) + ["llama2", "metaspace_always", "metaspace_never", "gpt2_prefix_space", "gpt2_trim",
                            "gpt2_trim_prefix", "gpt2_strip", "qwen25_lower"]
    extra = ["a  <tag>  b word words <|im_end|>\n x", "A <TAG> <tag>b WORD Word İx ǅ", " lead", "  <sp> trailing  ",
             "x \u00a0 y  ", "<s>x", "日本", " ", "Hello world  x"]
    cases, expected, labels = [], [], []
    for name in names:
        t = train(name, corpus)
        path = os.path.join(tmp, f"spans_{name}.json")
        t.save(path)
        form = "NFC" if name.startswith("qwen25") else None
        for text in unseen_texts.DOCS + extra + chat_texts:
            e = t.encode(text, add_special_tokens=False)
            by_ids = form is not None and unicodedata.normalize(form, text) != text
            cases.append({"tokenizer": path, "text": text})
            expected.append((e.ids, None if by_ids else byte_offsets(text, e.offsets)))
            labels.append((name, text))
    out = subprocess.run([token_spans], input="".join(json.dumps(c) + "\n" for c in cases), capture_output=True,
                         text=True, encoding="utf-8")
    if out.returncode != 0:
        fail(f"token_spans exited {out.returncode}: {out.stderr[-2000:]}")
    results = [json.loads(line) for line in out.stdout.splitlines()]
    if len(results) != len(cases):
        fail(f"{len(results)} results for {len(cases)} cases")
    by_ids = 0
    for (name, text), (ids, spans), got in zip(labels, expected, results):
        if got.get("ids") != ids:
            fail(f"spans {name} {text[:40]!r}: ids differ: zerodp {got.get('ids', got)}, tokenizers {ids}")
        if spans is None:
            by_ids += 1
        elif got["spans"] != spans:
            i = next(i for i, (a, b) in enumerate(zip(got["spans"], spans)) if a != b)
            fail(f"spans {name} {text[:60]!r}: token {i} (id {ids[i]}): zerodp {got['spans'][i]}, tokenizers "
                 f"{spans[i]} (all: {list(zip(ids, spans))[:40]})")
    print(f"spans: {len(cases)} texts of {len(names)} tokenizers equal to tokenizers' offsets "
          f"({by_ids} that NFC changes compared by ids)")


def read_examples(data):
    ids = zt.read_token_file(data)
    labels = instruction_ref.read_labels(instruction_ref.labels_path(data), len(ids)).tolist()
    starts = [i for i, label in enumerate(labels) if label & instruction_ref.EXAMPLE_START] + [len(ids)]
    return [(ids[b:e], labels[b:e]) for b, e in zip(starts, starts[1:])]


def chat_case(zerodp, tmp, name, shape, tokenizer):
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    tokenizer.save(os.path.join(d, "tokenizer.json"))
    config = dict(special_tokens(name), chat_template=template_text(name), tokenizer_class="PreTrainedTokenizerFast")
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    convs = [c for c in CONVERSATIONS if shape != "mistral" or alternates(c)]
    jsonl, data = os.path.join(d, "chat.jsonl"), os.path.join(d, "chat.bin")
    with open(jsonl, "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps({"messages": c}, ensure_ascii=False) + "\n")
    r = subprocess.run([zerodp, "tokenize", "--tokenizer", os.path.join(d, "tokenizer.json"), "--sft", jsonl,
                        "--out", data], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail(f"{name}: zerodp tokenize --sft exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    got = read_examples(data)
    if len(got) != len(convs):
        fail(f"{name}: {len(got)} examples for {len(convs)} conversations")
    tok = PreTrainedTokenizerFast.from_pretrained(d)
    _, marked_by = CHAT_CASES[name]
    targets = 0
    rendered = []
    for k, (messages, (ids, labels)) in enumerate(zip(convs, got)):
        want = tok.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
                                       chat_template=template_text(marked_by or name))
        rendered.append(tok.apply_chat_template(messages, tokenize=False))
        if ids != want["input_ids"]:  # (an edited template renders the text the published one does)
            i = next((i for i, (a, b) in enumerate(zip(ids, want["input_ids"])) if a != b), min(len(ids), len(want)))
            raise Mismatch(f"{name} conversation {k}: ids differ at {i}: zerodp {ids[max(0, i - 3):i + 5]}, "
                           f"transformers {want['input_ids'][max(0, i - 3):i + 5]}")
        mask = [0] + list(want["assistant_masks"][1:])
        mine = [label & instruction_ref.TARGET for label in labels]
        if labels[0] != instruction_ref.EXAMPLE_START or mine != mask:
            i = next((i for i, (a, b) in enumerate(zip(mine, mask)) if a != b), 0)
            pieces = [tok.decode([t]) for t in ids]
            raise Mismatch(f"{name} conversation {k}: targets differ at token {i} ({pieces[max(0, i - 3):i + 4]}): "
                           f"zerodp {mine[max(0, i - 3):i + 4]}, transformers {mask[max(0, i - 3):i + 4]}"
                           + (f" (the mask of {marked_by})" if marked_by else ""))
        targets += sum(mine)
    how = f"fallback = the mask of {marked_by}" if marked_by else "return_assistant_tokens_mask"
    print(f"chat {name:32s} {len(convs)} conversations, {sum(len(i) for i, _ in got)} tokens, {targets} targets "
          f"equal to transformers' ({how})")
    return rendered


def alternates(messages):
    rest = messages[1:] if messages[0]["role"] == "system" else messages
    return all(m["role"] == ("user" if i % 2 == 0 else "assistant") for i, m in enumerate(rest))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    zerodp, token_spans = sys.argv[1], sys.argv[2]
    corpus = zt.CORPUS
    with tempfile.TemporaryDirectory(prefix="zerodp_chat_ref_") as tmp:
        tokenizers = {shape: train(shape, corpus) for shape in SHAPES}
        for attempt in range(2):
            day = datetime.date.today()
            try:
                rendered = []
                for name, (shape, _) in CHAT_CASES.items():
                    rendered += chat_case(zerodp, tmp, name, shape, tokenizers[shape])
                break
            except Mismatch as e:
                if attempt == 1 or datetime.date.today() == day:
                    fail(str(e))
                print(f"(the date changed during the run: again) {e}")
        spans_part(token_spans, tmp, corpus, rendered)
    print(f"OK: zerodp tokenize --sft equals transformers {__import__('transformers').__version__}'s "
          f"apply_chat_template on {len(CHAT_CASES)} templates")


if __name__ == "__main__":
    main()
