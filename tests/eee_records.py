"""Every Eval Ever records of other evaluations, as every-eval-ever's converters write them (for the tests)."""
from __future__ import annotations

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the hub model of fairnb's embedded "default"


def lm_eval_record(model_id: str = SMOL) -> dict:
    """A record as every-eval-ever's lm-eval converter writes it for a Winogender task."""
    return {"schema_version": "0.3.0", "evaluation_id": f"winogender_all/{model_id}/1767225600",
            "retrieved_timestamp": "1767225600",
            "source_metadata": {"source_name": "lm-evaluation-harness", "source_type": "evaluation_run",
                                "source_organization_name": "a lab", "evaluator_relationship": "third_party"},
            "eval_library": {"name": "lm_eval", "version": "0.4.9"},
            "model_info": {"name": model_id.rsplit("/", 1)[-1], "id": model_id,
                           "additional_details": {"deployment_type": "self_deployed", "model_availability": "open_weights"}},
            "evaluation_results": [{
                "evaluation_result_id": "acc:none", "evaluation_name": "winogender_all",
                "source_data": {"dataset_name": "winogender_all", "source_type": "hf_dataset",
                                "hf_repo": "oskarvanderwal/winogender", "hf_split": "test"},
                "metric_config": {"evaluation_description": "acc", "metric_name": "acc", "lower_is_better": False,
                                  "score_type": "continuous", "min_score": 0.0, "max_score": 1.0},
                "score_details": {"score": 0.6125, "uncertainty": {"standard_error": {"value": 0.0182,
                                                                                      "method": "analytic"},
                                                                   "num_samples": 720}}}]}
