"""Datasets: coreference pairs, probe sentences, GFair-style triples, counterfactual pivots.

One submodule per kind; the public loaders are re-exported here so that
``fairnb.datasets.<name>`` works for all of them.
"""
