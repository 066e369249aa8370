"""Every Eval Ever records of other evaluations, as every-eval-ever's converters write them (for the tests)."""
from __future__ import annotations

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the hub model of fairnb's embedded "default"


def lm_eval_record(model_id: str = SMOL) -> dict:
    """The record every-eval-ever 0.3.0's lm-eval converter (``python -m every_eval_ever.converters.lm_eval``)
    writes for lm-evaluation-harness 0.4.9's Winogender accuracy of ``model_id``, field for field."""
    developer = model_id.split("/")[0]
    return {
        "schema_version": "0.3.0", "evaluation_id": f"winogender_all/{model_id}/1796421653.39632",
        "evaluation_timestamp": "1764842400", "retrieved_timestamp": "1796421653.39632",
        "source_metadata": {"source_name": "lm-evaluation-harness", "source_type": "evaluation_run",
                            "source_organization_name": "a lab", "evaluator_relationship": "third_party"},
        "eval_library": {"name": "lm_eval", "version": "0.4.9"},
        "model_info": {"name": model_id, "id": model_id, "developer": developer,
                       "inference_engine": {"name": "transformers"},
                       "additional_details": {"model_args": f"pretrained={model_id},dtype=float32",
                                              "deployment_type": "unknown", "model_availability": "unknown"}},
        "evaluation_results": [{
            "evaluation_result_id": "acc", "evaluation_name": "winogender_all",
            "source_data": {"dataset_name": "winogender_all", "source_type": "hf_dataset",
                            "hf_repo": "oskarvanderwal/winogender", "hf_split": "test"},
            "evaluation_timestamp": "1764842400",
            "metric_config": {"evaluation_description": "acc", "metric_id": "accuracy", "metric_name": "acc",
                              "metric_kind": "accuracy", "metric_unit": "proportion", "lower_is_better": False,
                              "score_type": "continuous", "min_score": 0.0, "max_score": 1.0,
                              "additional_details": {"metric_id_registry_revision": "8b83e9c"}},
            "score_details": {"score": 0.6125, "uncertainty": {"standard_error": {"value": 0.0182, "method": "analytic"},
                                                               "num_samples": 720}}}]}
