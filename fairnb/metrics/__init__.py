"""One module per method: bvf, probing, ucerf, group_fairness, certification."""
