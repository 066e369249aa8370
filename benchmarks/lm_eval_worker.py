"""The lm-evaluation-harness contender, run in its own process (lm-eval lives in an overlay).

    python -m benchmarks.lm_eval_worker SPEC.json RESULT.npz

SPEC holds ``model`` (a local model folder), ``requests`` (``[context, continuation]``
pairs), ``device``, ``dtype``, ``batch_size`` and ``repeats``. The model is loaded once
(not timed); each repetition times one ``HFLM.loglikelihood`` call over all requests.
RESULT holds ``logprobs`` (one per request, in order) and ``seconds`` (one per repetition).
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np


def main(spec_path: str, result_path: str) -> None:
    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    spec = json.loads(open(spec_path).read())
    lm = HFLM(pretrained=spec["model"], device=spec["device"], dtype=spec["dtype"], batch_size=spec["batch_size"])
    requests = [Instance(request_type="loglikelihood", doc={}, arguments=(context, continuation), idx=i)
                for i, (context, continuation) in enumerate(spec["requests"])]
    seconds = []
    for _ in range(spec["repeats"]):
        start = time.perf_counter()
        answers = lm.loglikelihood(requests, disable_tqdm=True)
        if spec["device"].startswith("cuda"):
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    np.savez(result_path, logprobs=np.array([logp for logp, _ in answers]), seconds=np.array(seconds))


if __name__ == "__main__":
    main(*sys.argv[1:3])
