"""Model specs from Python: head_dim, the presets by name, and ModelSpec.from_hf_config on the
published config.json of Llama-3-8B, Qwen2.5-7B, Qwen3-8B and Qwen3-32B."""

import copy
import json
import os
import pickle
import tempfile
import unittest

import dcp

# The config.json files as published on the Hugging Face hub (the keys from_hf_config reads and
# the ones around them, verbatim).
LLAMA3_8B = {  # meta-llama/Meta-Llama-3-8B
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.0.dev0",
    "use_cache": True,
    "vocab_size": 128256,
}

QWEN25_7B = {  # Qwen/Qwen2.5-7B-Instruct: no attention_bias key, q/k/v biases by model_type
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 152064,
}

QWEN3_8B = {  # Qwen/Qwen3-8B
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 12288,
    "max_position_embeddings": 40960,
    "max_window_layers": 36,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# Qwen/Qwen3-32B: its config.json differs from Qwen3-8B's in these five keys only.
QWEN3_32B = dict(QWEN3_8B, hidden_size=5120, intermediate_size=25600, max_window_layers=64,
                 num_attention_heads=64, num_hidden_layers=64)


def named(spec: dcp.ModelSpec, name: str) -> dcp.ModelSpec:
    out = copy.copy(spec)
    out.name = name
    return out


class HeadDimTest(unittest.TestCase):
    def test_head_dim_is_a_field_and_head_width_its_value_in_use(self) -> None:
        qwen3 = dcp.models.qwen3_32b()
        self.assertEqual(qwen3.head_dim, 128)
        self.assertEqual(qwen3.head_width(), 128)
        self.assertEqual(qwen3.q_hidden(), 64 * 128)
        self.assertEqual(qwen3.kv_hidden(), 8 * 128)
        llama = dcp.models.llama3_8b()
        self.assertEqual(llama.head_dim, 0)  # hidden / heads
        self.assertEqual(llama.head_width(), 128)
        self.assertEqual(llama.q_hidden(), llama.hidden)
        spec = dcp.ModelSpec(name="x", layers=2, hidden=1024, heads=16, kv_heads=8, ffn=3072,
                             vocab=1000, head_dim=128)
        self.assertEqual(spec.q_hidden(), 2048)
        spec.validate()
        self.assertIn("head_dim=128", repr(spec))
        self.assertEqual(pickle.loads(pickle.dumps(spec)), spec)
        self.assertEqual(copy.deepcopy(spec).head_dim, 128)

    def test_head_dim_is_validated(self) -> None:
        spec = dcp.models.llama3_8b()
        spec.head_dim = -4
        with self.assertRaisesRegex(dcp.InvalidSpec, "head_dim = -4, must be >= 0"):
            spec.validate()
        spec = dcp.models.llama3_8b()
        spec.hidden = 4100  # not a multiple of 32 heads: needs head_dim
        with self.assertRaisesRegex(dcp.InvalidSpec, "hidden = 4100 is not a multiple of heads = 32"):
            spec.validate()
        spec.head_dim = 128
        spec.validate()

    def test_qwen3_32b_preset_by_name_matches_the_published_count(self) -> None:
        self.assertIn("qwen3-32b", dcp.models.names())
        qwen3 = dcp.models.by_name("qwen3-32b")
        self.assertEqual(qwen3, dcp.models.qwen3_32b())
        self.assertAlmostEqual(qwen3.total_params() / 32.8e9, 1.0, delta=0.02)
        self.assertAlmostEqual(qwen3.layers * qwen3.block_params() / 31.2e9, 1.0, delta=0.02)
        plan = dcp.plan([4096, 32768], model="qwen3-32b", gpus=8,
                        training=dcp.TrainingSpec(zero_stage=3))
        self.assertEqual(sorted(i for s in plan.micro_steps for i in s.sample_ids), [0, 1])


class FromHfConfigTest(unittest.TestCase):
    def test_published_configs_give_the_presets(self) -> None:
        for config, preset in ((LLAMA3_8B, dcp.models.llama3_8b()),
                               (QWEN25_7B, dcp.models.qwen25_7b()),
                               (QWEN3_32B, dcp.models.qwen3_32b())):
            with self.subTest(preset.name):
                spec = dcp.ModelSpec.from_hf_config(config)
                self.assertEqual(spec.name, config["model_type"])
                self.assertEqual(named(spec, preset.name), preset)

    def test_qwen3_8b_gives_the_published_parameter_count(self) -> None:
        spec = dcp.ModelSpec.from_hf_config(QWEN3_8B)
        self.assertEqual((spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.head_dim),
                         (36, 4096, 32, 8, 0))  # head_dim 128 = 4096 / 32, kept as 0
        self.assertEqual(spec.mlp, dcp.MlpKind.swiglu)
        self.assertFalse(spec.qkv_bias)
        # Qwen3-8B model card: 8.2 B parameters, 6.95 B non-embedding.
        self.assertAlmostEqual(spec.total_params() / 8.2e9, 1.0, delta=0.02)
        self.assertAlmostEqual(spec.layers * spec.block_params() / 6.95e9, 1.0, delta=0.02)

    def test_name_activation_and_bias(self) -> None:
        config = dict(LLAMA3_8B, _name_or_path="meta-llama/Meta-Llama-3-8B")
        self.assertEqual(dcp.ModelSpec.from_hf_config(config).name, "meta-llama/Meta-Llama-3-8B")
        gelu = dcp.ModelSpec.from_hf_config(dict(LLAMA3_8B, hidden_act="gelu_pytorch_tanh"))
        self.assertEqual(gelu.mlp, dcp.MlpKind.gelu)
        self.assertTrue(dcp.ModelSpec.from_hf_config(dict(LLAMA3_8B, attention_bias=True)).qkv_bias)
        self.assertFalse(dcp.ModelSpec.from_hf_config(dict(QWEN25_7B, attention_bias=False)).qkv_bias)
        no_kv = {k: v for k, v in LLAMA3_8B.items() if k != "num_key_value_heads"}
        self.assertEqual(dcp.ModelSpec.from_hf_config(no_kv).kv_heads, 32)

    def test_a_path_to_the_file_or_its_folder_works(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "config.json")
            with open(path, "w") as f:
                json.dump(QWEN3_32B, f)
            expected = dcp.ModelSpec.from_hf_config(QWEN3_32B)
            self.assertEqual(dcp.ModelSpec.from_hf_config(path), expected)
            self.assertEqual(dcp.ModelSpec.from_hf_config(folder), expected)

    def test_what_dcp_cannot_model_names_the_key_and_value(self) -> None:
        missing = {k: v for k, v in LLAMA3_8B.items() if k != "intermediate_size"}
        with self.assertRaisesRegex(dcp.InvalidSpec, "intermediate_size is missing"):
            dcp.ModelSpec.from_hf_config(missing)
        with self.assertRaisesRegex(dcp.InvalidSpec, "hidden_act = 'relu2'"):
            dcp.ModelSpec.from_hf_config(dict(LLAMA3_8B, hidden_act="relu2"))
        with self.assertRaisesRegex(dcp.InvalidSpec, "num_local_experts = 8"):
            dcp.ModelSpec.from_hf_config(dict(LLAMA3_8B, num_local_experts=8))
        with self.assertRaisesRegex(dcp.InvalidSpec, "num_experts = 128"):
            dcp.ModelSpec.from_hf_config(dict(QWEN3_8B, num_experts=128))
        with self.assertRaisesRegex(dcp.InvalidSpec, "hidden_size = '4096', must be an integer"):
            dcp.ModelSpec.from_hf_config(dict(LLAMA3_8B, hidden_size="4096"))
        with self.assertRaisesRegex(dcp.InvalidSpec, "kv_heads = 5 must divide heads = 32"):
            dcp.ModelSpec.from_hf_config(dict(LLAMA3_8B, num_key_value_heads=5))
        with self.assertRaises(TypeError):
            dcp.ModelSpec.from_hf_config(42)


if __name__ == "__main__":
    unittest.main()
