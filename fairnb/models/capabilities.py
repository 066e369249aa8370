"""What a model can give a chapter, and the one sentence when it cannot.

A chapter declares what it asks of a model in ``CHAPTER.needs`` (see :mod:`fairnb.contract`):
``scores`` (token probabilities), ``generate`` (text) and ``embeddings`` (input embeddings, for
soft prefixes). A local model gives all three; a served model (``openai:<model>@<base_url>``)
gives text, and token probabilities only where its spec says the server returns log-probs and
names a tokenizer (see :mod:`fairnb.models.served_spec`). The runner skips a (model, chapter)
pair whose chapter needs more, with :func:`missing_for`'s sentence as the reason.
"""
from __future__ import annotations

from collections.abc import Iterable

from fairnb.models.names import ModelSpec

CAPABILITIES = ("scores", "generate", "embeddings")
WHAT = {"scores": "token probabilities", "generate": "generated text", "embeddings": "input embeddings"}
# Hub models fairnb's model layer cannot score or generate with yet, and why (the reproduction page names them).
UNSUPPORTED_MODELS = {
    "t5-base": "an encoder-decoder (T5): fairnb scores causal and masked LMs only",
    "facebook/bart-base": "an encoder-decoder (BART): fairnb scores causal and masked LMs only",
    "google/flan-t5-xl": "an encoder-decoder (Flan-T5): fairnb's generation cuts the prompt's length off "
                         "the output, which only a causal LM echoes",
    "xlnet-base-cased": "a permutation LM (XLNet): predicting a position needs perm_mask and target_mapping, "
                        "which fairnb's scoring does not pass",
    "THUDM/chatglm2-6b": "custom model code (trust_remote_code), which fairnb's loader does not run",
    "baichuan-inc/Baichuan-13B-Base": "custom model code (trust_remote_code), which fairnb's loader does not run",
}


def describe_missing(model: str, missing: Iterable[str]) -> str:
    """The one sentence that says what ``model`` cannot give.

    Examples:
        >>> describe_missing("openai:smol@http://127.0.0.1:8000/v1", ["scores"])
        'openai:smol@http://127.0.0.1:8000/v1 serves text only: it gives no token probabilities, which this chapter needs; a server that returns log-probs can give them with logprobs=true and a tokenizer in the spec.'
        >>> describe_missing("gpt2", ["generate"])
        'gpt2 gives no generated text, which this chapter needs.'
    """
    missing = sorted(set(missing))
    what = " or ".join(WHAT.get(m, m) for m in missing)
    if not ModelSpec.parse(model, strict=False).served:
        return f"{model} gives no {what}, which this chapter needs."
    sentence = f"{model} serves text only: it gives no {what}"
    if "scores" in missing:
        sentence += (", which this chapter needs; a server that returns log-probs can give them"
                     " with logprobs=true and a tokenizer in the spec")
    if "embeddings" in missing:
        sentence += (", so soft prefixes are skipped" if "scores" not in missing
                     else "; soft prefixes need input embeddings, which no server gives")
    return sentence + "."


class MissingCapability(ValueError):
    """A model asked for what it cannot give (token probabilities from a text-only server...).

    Examples:
        >>> str(MissingCapability("openai:m@http://h/v1", ["embeddings"]))
        'openai:m@http://h/v1 serves text only: it gives no input embeddings, so soft prefixes are skipped.'
    """

    def __init__(self, model: str, missing: Iterable[str]):
        self.model, self.missing = model, tuple(sorted(set(missing)))
        super().__init__(describe_missing(model, self.missing))


def capabilities(model_spec: str) -> tuple[str, ...]:
    """What a model can give: all of :data:`CAPABILITIES` for a local model; text (and token
    probabilities where its spec promises log-probs and names a tokenizer) for a served one.

    Examples:
        >>> capabilities("default")
        ('scores', 'generate', 'embeddings')
        >>> capabilities("openai:m@http://h/v1"), capabilities("openai:m@http://h/v1?logprobs=true&tokenizer=default")
        (('generate',), ('scores', 'generate'))
    """
    server = ModelSpec.parse(model_spec).server
    if server is None:
        return CAPABILITIES
    return ("scores", "generate") if server.logprobs and server.tokenizer else ("generate",)


def missing_for(chapter_needs: Iterable[str], model_spec: str) -> str:
    """The sentence saying what of ``chapter_needs`` the model cannot give ("" when it gives all).

    Examples:
        >>> missing_for(("generate",), "openai:m@http://h/v1")
        ''
        >>> missing_for(("scores",), "openai:m@http://h/v1").split(":")[0]
        'openai'
    """
    unknown = set(chapter_needs) - set(CAPABILITIES)
    if unknown:
        raise ValueError(f"Unknown capabilities {sorted(unknown)}; the known ones are {list(CAPABILITIES)}.")
    lacking = set(chapter_needs) - set(capabilities(model_spec))
    return describe_missing(model_spec, lacking) if lacking else ""
