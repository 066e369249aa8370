"""Tiny randomly initialised GPT-2 and BERT models with tokenizers trained offline, and a tiny Llama GGUF file."""
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


def build_tiny_gguf(path: Path, tokenizer_model: str = "gpt2", seed: int = 0, **tokenizer_keys) -> Path:
    """A 1-layer Llama GGUF file (fp32) with the tokenizer metadata ``tokenizer_keys`` (``add_bos_token=False``...).

    Its vocabulary is ``<unk>`` (id 0), ``<s>`` (1), ``</s>`` (2), then the 256 byte-level characters
    with ``Th`` and ``The`` (``tokenizer_model="gpt2"``: byte-level BPE) or ``▁``, the corpus's
    characters and each of them after ``▁``, scored in that order (``"llama"``: SentencePiece).
    ``tokenizer_keys`` take ``bos/eos/unk/pad_token_id``, ``add_bos_token``, ``add_eos_token`` and
    ``add_space_prefix``; a key not given is not written.
    """
    import gguf
    import numpy as np

    special = ["<unk>", "<s>", "</s>"]
    if tokenizer_model == "gpt2":
        pieces = sorted(pre_tokenizers.ByteLevel.alphabet()) + ["Th", "The"]
    else:
        letters = sorted(set("".join(CORPUS)) - {" "})
        pieces = ["▁"] + letters + ["▁" + c for c in letters]
    tokens = special + pieces
    hidden, heads, ffn = 16, 2, 32
    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in (("block_count", 1), ("context_length", 128), ("embedding_length", hidden),
                       ("feed_forward_length", ffn), ("head_count", heads), ("head_count_kv", heads),
                       ("rope_dimension_count", hidden // heads), ("vocab_size", len(tokens))):
        getattr(writer, f"add_{key}")(value)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model(tokenizer_model)
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(special) + [1] * (len(tokens) - len(special)))
    if tokenizer_model == "gpt2":
        writer.add_token_merges(["T h", "Th e"])
    else:
        writer.add_token_scores([-float(k) for k in range(len(tokens))])
    for key, value in tokenizer_keys.items():
        getattr(writer, f"add_{key}")(value)
    rng = np.random.default_rng(seed)
    shapes = {"token_embd.weight": (len(tokens), hidden), "output_norm.weight": (hidden,),
              "output.weight": (len(tokens), hidden), "blk.0.attn_norm.weight": (hidden,),
              "blk.0.ffn_norm.weight": (hidden,), "blk.0.ffn_gate.weight": (ffn, hidden),
              "blk.0.ffn_up.weight": (ffn, hidden), "blk.0.ffn_down.weight": (hidden, ffn)}
    shapes |= {f"blk.0.attn_{name}.weight": (hidden, hidden) for name in ("q", "k", "v", "output")}
    for name, shape in shapes.items():
        writer.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
