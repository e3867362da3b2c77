"""Tiny random MoE models with a locally made GLM tokenizer, built in seconds for tests and demos.

Weights cannot be downloaded here, so `tiny:ARCH` builds a few-MB model of a real architecture
(GLM-5's GlmMoeDsa, GLM-4.5's Glm4Moe, Qwen3Moe, Mixtral) from its transformers config with a
fixed seed, and a byte-level BPE tokenizer trained on a small built-in text that carries the GLM
special tokens as single ids. Its answers are junk; its shapes, caches and token plumbing are real.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, Field
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    Glm4MoeConfig,
    GlmMoeDsaConfig,
    MixtralConfig,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen3MoeConfig,
)

from swedojo.agent.backends.base import BackendError
from swedojo.agent.chat import GLM_SPECIAL_TOKENS

TINY_ARCHS: tuple[str, ...] = ("glm_moe_dsa", "glm4_moe", "qwen3_moe", "mixtral")

_CORPUS = """\
The agent reads the issue, plans a fix, edits the code, runs the tests and checks its own work.
It keeps a short plan, calls tools one at a time, and reads every observation before it acts.
When a test fails it looks at the traceback, finds the line, and changes as little as it can.

def parse_version(text: str) -> tuple[int, ...]:
    \"\"\"Split a dotted version string into integers.\"\"\"
    return tuple(int(part) for part in text.strip().split("."))

class Repository:
    def __init__(self, path):
        self.path = path
        self.files = {}

    def read(self, name):
        with open(self.path / name, encoding="utf-8") as handle:
            return handle.read()

$ python -m pytest tests/test_version.py -q
FAILED tests/test_version.py::test_parse - ValueError: invalid literal for int() with base 10: ''
1 failed, 12 passed in 0.31s
diff --git a/src/version.py b/src/version.py
--- a/src/version.py
+++ b/src/version.py
@@ -1,3 +1,3 @@
-    return tuple(int(part) for part in text.split("."))
+    return tuple(int(part) for part in text.strip().split(".") if part)
{"command": "ls -la src", "path": "src/version.py", "old": "text", "new": "text.strip()"}
"""


class UnknownTinyArchError(BackendError):
    """No tiny model is defined for that architecture name."""


class TinySize(BaseModel):
    """Dimensions of a tiny model; the defaults make a few-MB model for tests."""

    hidden_size: int = Field(default=64, ge=32)
    """Width; heads are 16 wide, FFNs twice this."""
    num_layers: int = Field(default=2, ge=2)
    """Decoder layers; the first is dense, the rest MoE."""
    num_experts: int = Field(default=4, ge=2)
    """Routed experts per MoE layer (two active per token)."""
    index_topk: int = Field(default=16, ge=1)
    """GLM-5 DSA: tokens each query may attend to; small so tests cover the sparse case."""


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on `_CORPUS`; any text encodes, and the GLM specials are single ids."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=list(GLM_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS.splitlines(keepends=True), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
    )


def tiny_config(arch: str, vocab_size: int, eos_token_id: int, size: TinySize | None = None) -> PretrainedConfig:
    """A small config of the named architecture."""
    size = size or TinySize()
    hidden, heads = size.hidden_size, size.hidden_size // 16
    common: dict[str, Any] = {
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": size.num_layers,
        "num_attention_heads": heads,
        "max_position_embeddings": 16384,
        "eos_token_id": eos_token_id,
        "pad_token_id": eos_token_id,
        "bos_token_id": None,
        "num_experts_per_tok": 2,
        "tie_word_embeddings": False,
    }
    if arch == "glm_moe_dsa":
        return GlmMoeDsaConfig(
            **common,
            num_key_value_heads=heads,
            moe_intermediate_size=hidden,
            n_routed_experts=size.num_experts,
            n_shared_experts=1,
            n_group=1,
            topk_group=1,
            first_k_dense_replace=1,
            kv_lora_rank=hidden // 2,
            q_lora_rank=hidden // 2,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=16,
            index_topk=size.index_topk,
            index_head_dim=16,
            index_n_heads=4,
        )
    if arch == "glm4_moe":
        return Glm4MoeConfig(
            **common,
            num_key_value_heads=max(1, heads // 2),
            moe_intermediate_size=hidden,
            n_routed_experts=size.num_experts,
            n_shared_experts=1,
            n_group=1,
            topk_group=1,
            first_k_dense_replace=1,
            use_qk_norm=True,
        )
    if arch == "qwen3_moe":
        return Qwen3MoeConfig(
            **common,
            num_key_value_heads=max(1, heads // 2),
            head_dim=16,
            moe_intermediate_size=hidden,
            num_experts=size.num_experts,
            mlp_only_layers=[0],
        )
    if arch == "mixtral":
        return MixtralConfig(
            **common, num_key_value_heads=max(1, heads // 2), head_dim=16, num_local_experts=size.num_experts
        )
    raise UnknownTinyArchError(f"unknown tiny architecture {arch!r}; choose from {', '.join(TINY_ARCHS)}")


def build_tiny(
    arch: str, size: TinySize | None = None, seed: int = 0
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast]:
    """A random float32 model of `arch` and the GLM tokenizer; the same seed gives the same weights."""
    tokenizer = build_tokenizer()
    vocab = -(-len(tokenizer) // 64) * 64
    config = tiny_config(arch, vocab, tokenizer.eos_token_id, size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return model.eval(), tokenizer


def save_tiny(arch: str, directory: str | Path, size: TinySize | None = None, seed: int = 0) -> Path:
    """Write a tiny checkpoint (model + tokenizer) that loads like a real one."""
    path = Path(directory)
    model, tokenizer = build_tiny(arch, size, seed)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
