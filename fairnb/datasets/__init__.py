"""Datasets: coreference pairs, probe sentences, GFair-style triples, counterfactual pivots.

One submodule per kind; the public loaders are re-exported here so that
``fairnb.datasets.<name>`` works for all of them.
"""
from fairnb.datasets.pivots import (  # noqa: E402,F401 - chapter 5
    PivotSet, load_bold_pivots, load_decodingtrust_pivots, load_pivots, pivots_from_templates, select_pivots,
)
from fairnb.datasets.gfair import (  # noqa: E402,F401 - chapter 4
    DIMENSIONS, GFairSchema, attributes_by_dimension, holisticbias_targets, load_schema, sample_per_dimension,
    sample_triples, sbic_attributes,
)
from fairnb.datasets.coref import (  # noqa: E402,F401 - chapter 3
    CorefPair, coref_table, load_coref, load_synthbias, load_winobias, limit_pairs,
)
from fairnb.datasets.probes import (  # noqa: E402,F401 - chapter 2
    adapt_to_my_friend, attribute_word_probs, attribute_words, build_probes, complete_probes, most_least_biased,
    naturally_sourced_probes, probing_results, producible_pairs, read_sts_b, score_probes, self_prompting_probes,
    template_probes,
)
from fairnb.datasets.bvf import (  # noqa: E402,F401 - chapter 1
    default_templates, load_attribute_words, load_group_statistics, load_occupations, load_templates, template_prompt,
)
