"""Qwen 3 (Qwen3ForCausalLM) for the transformers reference of zdptest.llama_ref, on a transformers that
has no Qwen 3 of its own.

Qwen3ForCausalLM came with transformers 4.51, which needs torch >= 2.5; the reference venv reuses
Debian's torch 1.13 (scripts/setup/transformers_venv.sh), so its transformers stops at 4.49. Qwen 3's layers
are Llama's with one addition: before RoPE, an RMSNorm over each head of q and of k (q_norm, k_norm:
one weight [head_dim] each, transformers' RMSNorm). This module builds that model from transformers'
own Llama classes: LlamaForCausalLM, with a LlamaRMSNorm q_norm and k_norm on each attention module
applied to q_proj's and k_proj's outputs head by head (a forward hook: normalising the last axis of
[..., heads, head_dim] before or after the transpose that follows is the same). Its tensor names,
their order and the config.json it saves are Qwen3ForCausalLM's, so zerodp reads its directories as
Qwen 3 and a transformers with Qwen 3 reads them too. Where transformers has Qwen3ForCausalLM
(llama_ref.architecture) that class is used instead and this one is not.
"""
import json
import os

CONFIG_FIELDS = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}


def model_class(transformers):
    """A LlamaForCausalLM subclass computing Qwen 3 (transformers' Llama modules, q_norm and k_norm added)."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    class Qwen3OnLlamaForCausalLM(transformers.LlamaForCausalLM):
        config_json_fields = CONFIG_FIELDS

        def __init__(self, config):
            super().__init__(config)
            for layer in self.model.layers:
                attn = layer.self_attn
                attn.q_norm = LlamaRMSNorm(attn.head_dim, eps=config.rms_norm_eps)
                attn.k_norm = LlamaRMSNorm(attn.head_dim, eps=config.rms_norm_eps)
                attn.q_proj.register_forward_hook(_per_head(attn.q_norm, attn.head_dim))
                attn.k_proj.register_forward_hook(_per_head(attn.k_norm, attn.head_dim))

    return Qwen3OnLlamaForCausalLM


def _per_head(norm, head_dim):
    """A forward hook that replaces a projection's output [..., heads·head_dim] by `norm` over each head."""
    def hook(_module, _inputs, output):
        return norm(output.view(*output.shape[:-1], -1, head_dim)).view(output.shape)
    return hook


def fix_saved_config(model, out_dir):
    """save_pretrained writes the Llama class's model_type: a model of model_class says it is Qwen 3."""
    fields = getattr(type(model), "config_json_fields", None)
    if not fields:
        return
    path = os.path.join(out_dir, "config.json")
    with open(path) as f:
        config = json.load(f)
    config.update(fields)
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)
