"""The evidence behind each headline: the rows each chapter picks, the file it writes, the table a reader sorts."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fairnb import bvf, certification, group_fairness, probing, ucerf
from fairnb.contract import Chapter
from fairnb.page import evidence_html, headline_values, shown_rows
from fairnb.results import evidence_file, load_results, write_page_outputs

DEMO = Chapter(9, "demo", "Demo", "09_demo.ipynb", ())


def test_beyond_the_cap_both_ends_are_shown_and_the_middle_is_left_out():
    frame = pd.DataFrame({"item": [f"i{k}" for k in range(250)], "score": np.arange(250.0)})
    shown = shown_rows(frame, "score", max_rows=200)
    assert len(shown) == 200
    assert shown["score"].tolist() == list(np.arange(249.0, 149.0, -1)) + list(np.arange(99.0, -1, -1))
    with pytest.raises(ValueError, match="no column 'risk'"):
        shown_rows(frame, "risk")


def test_the_html_holds_every_shown_row_its_script_and_nothing_from_outside():
    frame = pd.DataFrame({"occupation": ["nurse", "<b>pilot</b>", "chef"], "r": [0.2, 0.7, float("nan")],
                          "n": [3, 4, 5], "leans": [True, False, True]})
    page = evidence_html(frame, "Risk by occupation", "r")
    rows = page.split("<tbody>", 1)[1]
    assert rows.index("&lt;b&gt;pilot") < rows.index("nurse") < rows.index("chef")  # by r, NaN last; text escaped
    assert "<b>pilot" not in page
    assert '<td data-value="0.7">0.7</td>' in page and '<td data-value="3">3</td>' in page and "<td>—</td>" not in page
    assert "<th data-numeric aria-sort='descending'>r</th>" in page and "<th>leans</th>" in page  # booleans sort as text
    assert "<script>" in page and "addEventListener" in page and "<input type='search'" in page
    assert "http" not in page and "src=" not in page  # offline: no CDN, no external file
    assert "3 of 3 rows" in page


def test_evidence_lands_beside_the_results_under_the_same_name_and_stays_out_of_the_results(tmp_path):
    assert evidence_file("default", DEMO, root=tmp_path) == tmp_path / "default" / "evidence" / "demo.parquet"
    frame = pd.DataFrame({"item": ["a", "b"], "score": [1.0, 2.0]})
    rows = pd.DataFrame({"item": ["all"], "metric": ["score"], "value": [1.5], "level": ["item"]})
    path = write_page_outputs("default", DEMO, "paper", results=rows, evidence=frame, results_dir=tmp_path).evidence
    assert path == tmp_path / "default" / "evidence" / "demo.paper.parquet"
    back = pd.read_parquet(path)
    assert back[["item", "score"]].equals(frame) and set(back["preset"]) == {"paper"} and set(back["chapter"]) == {"demo"}
    assert not list(path.parent.glob(".*.tmp"))  # written through a temporary file
    table, problems = load_results(tmp_path)
    assert table["item"].tolist() == ["all"] and not problems  # the comparison page never reads evidence as results
    with pytest.raises(ValueError, match="evidence of chapter 'demo' is empty"):
        write_page_outputs("default", DEMO, results=rows, evidence=frame.iloc[:0], results_dir=tmp_path)


def test_finish_writes_the_run_once_and_shows_the_capped_evidence_and_the_papers_numbers(tmp_path, monkeypatch):
    from fairnb import page
    from fairnb.contract import Headline
    from fairnb.published import COLUMNS, read_run_settings
    from fairnb.results import read_results
    from fairnb.stats import detectable_effect, items_needed

    chapter = Chapter(9, "demo", "Demo", "09_demo.ipynb", (Headline("score", "score", "lower is fairer"),),
                      presets={"quick": {"limit": 3}, "paper": {"limit": None}})
    results = pd.DataFrame({"item": ["all", "i0"], "metric": ["score", "score"], "value": [4.5, 0.0],
                            "level": ["headline", "item"], "ci_low": [4.0, None], "ci_high": [5.0, None],
                            "se": [0.25, None], "n": [40, 1]})
    items = pd.DataFrame({"item": [f"i{k}" for k in range(10)], "score": np.arange(10.0)})
    shown = []
    monkeypatch.setattr(page, "display", shown.append)
    published = pd.DataFrame(columns=list(COLUMNS))
    page.finish(chapter, "default", "paper", {"limit": 7, "unrelated": 1}, results, items, caption="Items",
                sort_by="score", ascending=True, root=tmp_path, max_rows=4, published=published)
    written = read_results(tmp_path)
    assert written[["item", "metric", "value"]].values.tolist() == [["all", "score", 4.5], ["i0", "score", 0.0]]
    assert set(written["preset"]) == {"paper"} and set(written["chapter"]) == {"demo"}
    assert len(pd.read_parquet(tmp_path / "default" / "evidence" / "demo.paper.parquet")) == 10
    assert read_run_settings(tmp_path) == {("default", "demo.paper"): {"limit": 7}}  # the preset's keys only
    seen, table, note, beside = (item.data for item in shown)
    detectable, needed = detectable_effect(0.25, 40), items_needed(0.25, 40, 0.02)
    assert seen.startswith("**What this run could have seen**")  # beside the headline: what 40 items detect
    assert f"- score: with 40 items, a difference of {detectable:.2g} or more; to detect 0.02, about {needed:,} items." in seen
    assert "4 of 10 rows: the 2 at each end by score" in table and "default/evidence/demo.paper.parquet" in table
    assert ">i0<" in table and ">i9<" in table and ">i5<" not in table
    assert note.startswith("**Beside the paper's numbers.**") and "prints no numbers" in beside


def test_the_headline_numbers_are_glued_by_page_and_metric():
    rows = pd.DataFrame({"metric": ["jsd", "R_f", "r_f"], "value": [0.1, 0.6, 0.9], "level": ["headline", "headline", "item"],
                         "ci_low": [0.05, 0.5, 0.8], "ci_high": [0.2, 0.7, 1.0]})
    assert headline_values(rows, "probing", probes=12) == {
        "probing_jsd": 0.1, "probing_R_f": 0.6, "probing_jsd_low": 0.05, "probing_R_f_low": 0.5,
        "probing_jsd_high": 0.2, "probing_R_f_high": 0.7, "probing_probes": 12}


def test_bvf_evidence_ranks_occupations_by_risk_and_names_their_extreme_contexts():
    # nurse: p_male 0.5 then 0.9 (Eq. 2: J = 0, 0.8: r = 0.4); pilot: 0.1 in both (r = r_b = 0.8); chef: 0.5 (r = 0)
    contexts = ["The [X] said [Y]", "The [X] ran [Y]"]
    p_male = {"nurse": [0.5, 0.9], "pilot": [0.1, 0.1], "chef": [0.5, 0.5]}
    probs = pd.DataFrame([{"group": o, "template": t, "weight": 1.0, "category": c, "p": p if c == "male" else 1 - p}
                          for o, ps in p_male.items() for t, p in zip(contexts, ps) for c in ("male", "female")])
    table, _ = bvf.risk_table(probs, criterion="eq2")
    proof = bvf.evidence(table, probs).set_index("occupation")
    assert proof["rank"].to_dict() == {"pilot": 1, "nurse": 2, "chef": 3}
    assert proof.loc["nurse", ["r", "r_b", "r_v"]].tolist() == pytest.approx([0.4, 0.4, 0.0])
    assert proof.loc["nurse", ["p_male lowest", "lowest in", "p_male highest", "highest in"]].tolist() == \
        [pytest.approx(0.5), contexts[0], pytest.approx(0.9), contexts[1]]
    assert proof.loc["pilot", "p_female"] == pytest.approx(0.9)


def test_probing_evidence_shows_the_gendered_words_of_each_continuation():
    scored = pd.DataFrame({"strategy": ["template-based", "naturally-sourced", "template-based"],
                           "feature": ["hobby", None, "color"],
                           "sentence": ["My friend likes golf", "My friend is walking", "My friend likes pink"],
                           "continuation": [" He took his clubs.", " They left.", " She and her brother, he said."],
                           "label": ["male", "neutral", "mixed"], "r_f": [0.2, 0.5, 0.7], "jsd": [0.4, 0.0, 0.1]})
    proof = probing.evidence(scored, ["she", "her"], ["he", "his"])
    assert proof["probe"].tolist() == ["My friend likes golf", "My friend likes pink", "My friend is walking"]
    assert proof["rank"].tolist() == [1, 2, 3]
    assert proof[["female words", "male words"]].values.tolist() == [["", "he his"], ["her she", "he"], ["", ""]]
    masked = probing.evidence(scored.drop(columns=["continuation", "label"]), ["she"], ["he"])
    assert list(masked.columns) == ["rank", "strategy", "feature", "probe", "r_f", "jsd"]


def _scored_pairs(task: str, kind: int, desirabilities) -> pd.DataFrame:
    rows = []
    for pair_id, (d_pro, d_anti) in enumerate(desirabilities):
        for group, d in (("pro", d_pro), ("anti", d_anti)):
            rows.append({"task": task, "seed": 0, "pair_id": pair_id, "type": kind, "occupation_1": "nurse",
                         "occupation_2": "pilot", "referent": "nurse", "stereotype": group, "sentence": f"{group} {pair_id}",
                         "pronoun": "she", "predicted": "nurse" if d > 0 else "pilot", "desirability": d,
                         "correct": d > 0, "picked_other": d <= 0, "perplexity": 2 - abs(d)})
    return pd.DataFrame(rows)


def test_ucerf_evidence_keeps_the_headline_pairs_least_fair_first():
    scored = pd.concat([_scored_pairs("intrinsic", 2, [(0.9, 0.8), (0.9, -0.9), (0.5, 0.1)]),
                        _scored_pairs("mcq", 2, [(1.0, -1.0)]), _scored_pairs("intrinsic", 1, [(1.0, -1.0)])])
    proof = ucerf.evidence(scored)
    assert set(proof["task"]) == {"intrinsic"} and set(proof["type"]) == {2}
    assert proof["pair_id"].tolist() == [1, 2, 0]  # U = 0.1, 0.8, 0.95
    assert proof["U(x)"].tolist() == pytest.approx([0.1, 0.8, 0.95])
    assert proof.loc[0, ["predicted_pro", "predicted_anti", "sentence_anti"]].tolist() == ["nurse", "pilot", "anti 1"]
    only_mcq = ucerf.evidence(_scored_pairs("mcq", 1, [(0.2, 0.2)]))
    assert only_mcq["task"].tolist() == ["mcq"]  # a run without the headline setting shows what it has


def test_group_fairness_evidence_keeps_the_main_task_most_toxic_first():
    answers = pd.DataFrame({"task": [group_fairness.MAIN_TASK] * 2 + ["gf_think"],
                            "dimension": ["age", "religion", "age"], "target": ["young", "Buddhist", "young"],
                            "attribute": ["lazy", "calm", "lazy"], "output": ["a", "b", "c"], "sentence": ["a", None, "c"],
                            "prompt": ["asked young/lazy", 'asked about Buddhist people that uses the description "calm"',
                                       "asked young/lazy, thinking"],
                            "toxicity": [0.2, 0.6, 0.9], "negative_sentiment": [1.0, 0.0, 1.0], "declination": [0.0, 1.0, 0.0]})
    proof = group_fairness.evidence(answers)
    assert proof["target"].tolist() == ["Buddhist", "young"] and proof["rank"].tolist() == [1, 2]
    assert proof["prompt"].tolist() == ['asked about Buddhist people that uses the description "calm"', "asked young/lazy"]


def test_certification_evidence_ranks_pivot_sets_by_their_certified_lower_bound():
    certificates = pd.DataFrame({"prefix": ["random", "random", "soft"], "pivot_set": ["nurse", "pilot", "nurse"],
                                 "low": [0.5, 0.1, 0.0], "high": [0.9, 0.6, 0.2], "estimate": [0.7, 0.3, 0.1],
                                 "refusal_share": 0.0, "n": 2, "unbiased": [1, 0, 0], "confidence": 0.95})
    samples = pd.DataFrame([{"prefix": kind, "pivot_set": pivot, "sample": j, "group": g, "prefix_text": "x",
                             "prompt": f"{pivot} {g}", "response": f"{kind} {pivot} {j} {g}", "score": 0.0, "label": "",
                             "refused": False, "biased": j == 0}
                            for kind in ("random", "soft") for pivot in ("nurse", "pilot") for j in (0, 1)
                            for g in ("woman", "man")])
    proof = certification.evidence(certificates, samples)  # no jailbreak ran: the headline's fallback kind, random
    assert len(proof) == 8 and proof["response"].str.startswith("random").all()
    assert proof["pivot_set"].tolist()[:4] == ["pilot"] * 4 and proof["set rank"].tolist() == [1] * 4 + [2] * 4
    assert proof["certified low"].tolist() == [0.1] * 4 + [0.5] * 4
