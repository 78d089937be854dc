"""A synthetic model pair for the llm layer's fast tests (no weights, no network).

- :class:`SynthModule`: a protocol model of :mod:`specbound.sim` (e.g. a
  :class:`~specbound.sim.SyntheticLM`) wrapped as a torch causal LM whose logits are the log
  of its next-token distribution and whose "key-value cache" (:class:`TokenCache`) holds the
  token ids, so a wrongly cropped or wrongly selected cache row changes the context and
  hence the tokens;
- :func:`tiny_tokenizer`: a word-level transformers tokenizer of :data:`WORDS` (one id per
  word, whitespace split) with a chat template, built in memory;
- :func:`synthetic_pair`: a :class:`~specbound.llm.ModelPair` of two such modules.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from specbound import sim
from specbound.llm._loading import LoadInfo
from specbound.llm.drafts import DraftSpec
from specbound.llm.models import LogitsProcessing, ModelPair

#: context window of the synthetic modules (``max_position_embeddings``)
WINDOW_POSITIONS = 256
#: the tiny tokenizer's vocabulary, in id order (12 words: the synthetic models' size)
WORDS = ("<eos>", "<unk>", "hello", "world", "the", "a", "cat", "dog", "user", "assistant",
         ":", ".")


class TokenCache:
    """A KV cache that stores the token ids (the protocol of transformers' DynamicCache)."""

    def __init__(self, ids):
        self.ids = ids

    def get_seq_length(self, layer_idx=0):
        return int(self.ids.shape[1])

    def crop(self, n):
        assert n < 0
        self.ids = self.ids[:, :n]

    def batch_repeat_interleave(self, r):
        self.ids = self.ids.repeat_interleave(r, dim=0)

    def batch_select_indices(self, idx):
        self.ids = self.ids[idx]


class SynthModule(torch.nn.Module):
    """A protocol model as a causal LM: logits = log of its next-token distribution."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        self.config = SimpleNamespace(vocab_size=lm.vocab_size,
                                      max_position_embeddings=WINDOW_POSITIONS)
        self.calls = []

    def get_output_embeddings(self):
        return None

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None,
                use_cache=False, logits_to_keep=0):
        prev = past_key_values.ids if past_key_values is not None else input_ids[:, :0]
        full = torch.cat([prev, input_ids], dim=1)
        n, k = input_ids.shape[1], (logits_to_keep or input_ids.shape[1])
        self.calls.append(tuple(input_ids.shape))
        ctxs = []
        for b in range(full.shape[0]):
            row = full[b]
            for j in range(prev.shape[1] + n - k, prev.shape[1] + n):
                if attention_mask is not None and attention_mask.ndim == 4:
                    # a tree mask: the context is what the query attends to, in order
                    sees = attention_mask[b, 0, j - prev.shape[1]] == 0
                    ctxs.append(row[sees].numpy().astype(np.int64))
                    continue
                keep = (torch.ones_like(row, dtype=torch.bool) if attention_mask is None
                        else torch.cat([torch.ones(prev.shape[1], dtype=torch.bool),
                                        attention_mask[b].bool()]))
                ctxs.append(row[:j + 1][keep[:j + 1]].numpy().astype(np.int64))
        P = sim.models.next_distributions(self.lm, ctxs).reshape(full.shape[0], k, -1)
        with np.errstate(divide="ignore"):
            logits = torch.from_numpy(np.log(P))
        return SimpleNamespace(logits=logits,
                               past_key_values=TokenCache(full) if use_cache else None)


def tiny_tokenizer():
    """A word-level fast tokenizer of :data:`WORDS` with a one-line chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>", unk_token="<unk>")
    tok.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} . "
                         "{% endfor %}{% if add_generation_prompt %}assistant : {% endif %}")
    return tok


def synthetic_pair(target, draft, tokenizer=None, processing=None):
    """A ModelPair of two protocol models (``tokenizer``: e.g. :func:`tiny_tokenizer`)."""
    info = LoadInfo("synthetic", "synthetic", "folder", "", False, 0.0)
    return ModelPair(SynthModule(target), SynthModule(draft), tokenizer,
                     processing or LogitsProcessing(), DraftSpec("model", "synthetic"),
                     device=torch.device("cpu"), load_info={"target": info, "draft": None})


def tiny_llama(seed: int = 0, *, sharpness: float = 20.0):
    """A 2-layer Llama causal LM over :data:`WORDS` (hidden size 16), random weights.

    A real transformers model (KV caches, every draft kind: ``temperature:``,
    ``early_exit:1``, ``quantized:``), built in memory in milliseconds once transformers is
    imported.  The output head is scaled by ``sharpness`` so that its next-token
    distributions are far from uniform (a random head gives logits of order 0.1).
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(WORDS), hidden_size=16, intermediate_size=32,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                      max_position_embeddings=WINDOW_POSITIONS, tie_word_embeddings=False,
                      eos_token_id=0, bos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpness)
    model.eval()
    model.requires_grad_(False)
    return model


def save_tiny_model(folder) -> str:
    """Write :func:`tiny_llama` and :func:`tiny_tokenizer` as a model folder (for
    ``load_pair(folder)``); returns the folder as a string."""
    tiny_llama().save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return str(folder)
