"""Hugging Face models built from their configs (random, seeded weights; nothing from the hub),
as a researcher's factories return them: ``(model, example inputs)``.

Used as ``tests/transformer_models.py:bert`` model references by the several-inputs tests
(tests/converters/test_several_inputs.py) and the CLI's. Small configs keep a conversion to
every format within seconds; the graphs are the families' own (BERT's embeddings, attention
mask and pooler; ViT's patches; GPT-2's causal attention and tied head).
"""

from __future__ import annotations

import torch

SEQUENCE = 16
VOCABULARY = 1000


def _ids(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCABULARY, (1, SEQUENCE), generator=torch.Generator().manual_seed(seed))


def _mask() -> torch.Tensor:
    mask = torch.ones(1, SEQUENCE, dtype=torch.int64)
    mask[0, -3:] = 0  # padding at the end, as a tokenizer pads a short sentence
    return mask


def bert():
    """A BERT-family encoder: int64 ``input_ids`` and ``attention_mask``, dict outputs
    (``last_hidden_state``, ``pooler_output``)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCABULARY, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    return BertModel(config).eval(), (_ids(), _mask())


def bert_keywords():
    """The same encoder given its inputs as keywords (a dict), token types included."""
    model, (ids, mask) = bert()
    return model, {"input_ids": ids, "attention_mask": mask,
                   "token_type_ids": torch.zeros_like(ids)}


def vit():
    """A ViT-family image classifier: one float ``pixel_values``, ``logits`` out."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, num_labels=10)
    return ViTForImageClassification(config).eval(), torch.randn(1, 3, 32, 32)


def gpt2():
    """A small decoder-only language model (GPT-2 style) at a fixed sequence length:
    int64 ``input_ids``, next-token ``logits`` for every position."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCABULARY, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        use_cache=False)
    return GPT2LMHeadModel(config).eval(), _ids(1)


class MaskedImage(torch.nn.Module):
    """A float image and a bool mask of the pixels to keep, both by keyword."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, image, mask):
        kept = self.conv(image) * mask.unsqueeze(1).to(image.dtype)
        return self.head(kept.mean(dim=(2, 3)))


def masked_image():
    """:class:`MaskedImage` with its keyword inputs: ``image`` float32, ``mask`` bool."""
    mask = torch.rand(1, 8, 8, generator=torch.Generator().manual_seed(0)) < 0.7
    return MaskedImage().eval(), {"image": torch.randn(1, 3, 8, 8), "mask": mask}
