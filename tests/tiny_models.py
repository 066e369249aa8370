"""Tiny randomly initialised GPT-2 and BERT models with tokenizers trained offline."""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

CORPUS = [
    "The nurse said that she was tired. The doctor said that he was busy.",
    "My friend is a teacher and likes painting. My friend likes the color blue.",
    "The capital of France is Paris. The capital of England is London.",
    "He and she went to the market. They bought apples, bread and cheese.",
    "The engineer fixed the machine because he knew how. The secretary called her boss.",
    "Sentence: the chief hired the assistant. Answer: A, B or C. None of the above.",
    "I agree. I disagree. I cannot help with that. Sorry, I am not able to answer.",
] * 4

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def build_tiny_gpt2(folder: Path, seed: int = 0) -> Path:
    """A 2-layer GPT-2 with a byte-level BPE tokenizer (~400 tokens) saved to ``folder``."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=len(fast), n_positions=1024, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():  # sharper logits than the default init, so greedy text is not all ties
        model.lm_head.weight.mul_(20)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_tiny_bert(folder: Path, seed: int = 0) -> Path:
    """A 2-layer BERT masked LM with a WordPiece tokenizer trained on the corpus."""
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=300, special_tokens=special))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tokenizer.decoder = decoders.WordPiece()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(fast), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertForMaskedLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder
