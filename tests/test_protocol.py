"""Local and served models implement one declared interface, with the same parameters."""
from __future__ import annotations

import inspect

from fairnb.models.language_model import LanguageModel
from fairnb.models.protocol import LanguageModelProtocol
from fairnb.models.served import ServedModel

METHODS = ("next_word_probs", "continuation_logprobs", "generate", "embed", "apply_chat")


def test_both_model_classes_implement_the_protocol_with_its_parameters(tiny_gpt2):
    served = ServedModel.from_spec("openai:tiny@http://127.0.0.1:9/v1", use_cache=False)
    assert isinstance(tiny_gpt2, LanguageModelProtocol) and isinstance(served, LanguageModelProtocol)
    assert not isinstance(object(), LanguageModelProtocol)
    for method in METHODS:
        declared = list(inspect.signature(getattr(LanguageModelProtocol, method)).parameters)
        for cls in (LanguageModel, ServedModel):
            assert list(inspect.signature(getattr(cls, method)).parameters)[:len(declared)] == declared, (cls, method)
