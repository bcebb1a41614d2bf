"""ModelSpec.from_hf_config: a ModelSpec from a Hugging Face ``config.json``.

Reads the decoder-LM shape keys of Llama, Qwen2/2.5, Qwen3, Mistral and their kin; refuses with
InvalidSpec, naming the key and its value, what dcp cannot model (a missing shape key, an
activation it has no MLP for, a mixture of experts). Tied embeddings are counted as untied
(model_spec has one head layout), which puts the parameter count vocab x hidden high.
"""

import json
import os
from typing import Any, Dict, Mapping, Union

from ._dcp import InvalidSpec, MlpKind, ModelFamily, ModelSpec

# hidden_act values of gated SiLU MLPs (Llama, Qwen, Mistral: SwiGLU) and of GELU MLPs, as
# transformers.activations.ACT2FN names them.
_SWIGLU_ACTS = ("silu", "swish")
_GELU_ACTS = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate")
# Keys that give a mixture of experts its expert count (Mixtral; Qwen2-MoE and Qwen3-MoE;
# DeepSeek-V2/V3): dcp models dense MLPs only.
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
# model_type values whose attention carries q/k/v biases without an attention_bias key.
_QKV_BIAS_TYPES = ("qwen2",)


def _read(config: Union[Mapping[str, Any], str, "os.PathLike[str]"]) -> Dict[str, Any]:
    if isinstance(config, Mapping):
        return dict(config)
    if not isinstance(config, (str, os.PathLike)):
        raise TypeError("from_hf_config: config must be a dict or a path to config.json, not "
                        + type(config).__name__)
    path = os.fspath(config)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise InvalidSpec(f"from_hf_config: {path} holds a {type(data).__name__}, not a JSON object")
    return data


def _integer(config: Dict[str, Any], key: str, where: str) -> int:
    if key not in config:
        raise InvalidSpec(f"{where}: {key} is missing")
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(f"{where}: {key} = {value!r}, must be an integer")
    return value


def _mlp(config: Dict[str, Any], where: str) -> MlpKind:
    act = config.get("hidden_act")
    if act is None:
        raise InvalidSpec(f"{where}: hidden_act is missing")
    if act in _SWIGLU_ACTS:
        return MlpKind.swiglu
    if act in _GELU_ACTS:
        return MlpKind.gelu
    raise InvalidSpec(f"{where}: hidden_act = {act!r}, must be one of "
                      + ", ".join(_SWIGLU_ACTS + _GELU_ACTS) + " (SwiGLU or GELU MLPs)")


def model_spec_from_hf_config(config: Union[Mapping[str, Any], str, "os.PathLike[str]"]) -> ModelSpec:
    """A ModelSpec (decoder LM, causal attention) from a Hugging Face config.json, given as a
    dict or as a path (to the file or to the folder holding it).

    Keys read: hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads
    (default: the attention heads), intermediate_size, vocab_size, head_dim (optional; absent,
    null or equal to hidden / heads gives head_dim 0, as the presets have it), hidden_act (silu
    or swish: SwiGLU; gelu and its variants: GELU), attention_bias (default: true for
    model_type qwen2, false otherwise); the name from _name_or_path, else model_type. Raises
    InvalidSpec naming the key and its value for a missing or non-integer shape, an unknown
    activation or a mixture of experts (num_local_experts, num_experts or n_routed_experts
    above 1), and whatever ModelSpec.validate() raises.
    """
    data = _read(config)
    name = data.get("_name_or_path") or data.get("model_type") or "hf-model"
    where = f"from_hf_config ({name})"
    for key in _EXPERT_KEYS:
        experts = data.get(key)
        if isinstance(experts, int) and not isinstance(experts, bool) and experts > 1:
            raise InvalidSpec(f"{where}: {key} = {experts}: a mixture of experts, which dcp does "
                              "not model (dense MLPs only)")
    heads = _integer(data, "num_attention_heads", where)
    kv_heads = heads if data.get("num_key_value_heads") is None else _integer(
        data, "num_key_value_heads", where)
    hidden = _integer(data, "hidden_size", where)
    head_dim = 0 if data.get("head_dim") is None else _integer(data, "head_dim", where)
    if head_dim * heads == hidden:
        head_dim = 0  # hidden / heads, stored as the presets store it
    bias = data.get("attention_bias")
    if bias is None:
        bias = data.get("model_type") in _QKV_BIAS_TYPES
    elif not isinstance(bias, bool):
        raise InvalidSpec(f"{where}: attention_bias = {bias!r}, must be true or false")
    spec = ModelSpec(
        name=str(name),
        family=ModelFamily.decoder_lm,
        layers=_integer(data, "num_hidden_layers", where),
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        ffn=_integer(data, "intermediate_size", where),
        vocab=_integer(data, "vocab_size", where),
        mlp=_mlp(data, where),
        qkv_bias=bias,
        head_dim=head_dim,
    )
    spec.validate()
    return spec
