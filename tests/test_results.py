"""The results schema: levels, declared headlines, atomic round trip; the chapter registry."""
import pandas as pd
import pytest

import fairnb
from fairnb import bvf
from fairnb.results import read_results, write_page_outputs


def test_results_round_trip(tmp_path):
    frame = pd.DataFrame({"item": ["all", "nurse"], "metric": ["R", "r"], "value": [0.1, 0.2],
                          "level": ["headline", "group"]})
    path = write_page_outputs("org/model", bvf.CHAPTER, results=frame, results_dir=tmp_path).results
    assert path == tmp_path / "org__model" / "bvf.parquet"
    back = read_results(tmp_path)
    assert back[["model", "chapter", "item", "value", "level"]].values.tolist() == [
        ["org/model", "bvf", "all", 0.1, "headline"], ["org/model", "bvf", "nurse", 0.2, "group"]]
    with pytest.raises(ValueError, match="lacks the columns"):
        write_page_outputs("m", bvf.CHAPTER, results=frame.drop(columns="metric"), results_dir=tmp_path)


def test_rows_need_a_valid_level_and_declared_headlines(tmp_path):
    frame = pd.DataFrame({"item": ["all"], "metric": ["R"], "value": [0.1], "level": ["overall"]})
    with pytest.raises(ValueError, match="level is not one of"):
        write_page_outputs("m", bvf.CHAPTER, results=frame, results_dir=tmp_path)
    with pytest.raises(ValueError, match="declares no headline"):
        write_page_outputs("m", bvf.CHAPTER, results=frame.assign(level="headline", metric="mean r"), results_dir=tmp_path)
    assert not list(tmp_path.rglob("*.parquet"))


def test_registry_names_each_chapter_once():
    chapters = fairnb.chapters()
    assert [c.number for c in chapters] == sorted({c.number for c in chapters})
    assert len({c.key for c in chapters}) == len({c.notebook for c in chapters}) == len(chapters)
    assert fairnb.chapter(3).key == "ucerf" and fairnb.chapter("bvf").number == 1
    with pytest.raises(ValueError, match="Unknown chapter"):
        fairnb.chapter(9)


ROWS = pd.DataFrame({"item": ["all", "nurse"], "metric": ["R", "r"], "value": [0.1, 0.2], "level": ["headline", "group"]})
ITEMS = pd.DataFrame({"occupation": ["nurse", "pilot"], "r": [0.2, 0.5]})


def test_a_pages_outputs_are_one_unit_its_record_names_with_checksums(tmp_path):
    import hashlib
    import json

    from fairnb.results import read_page_outputs, record_file, write_page_outputs

    unit = write_page_outputs("default", bvf.CHAPTER, "paper", results=ROWS, evidence=ITEMS,
                              settings={"criterion": "official", "topics": ("gender",)}, results_dir=tmp_path)
    assert unit.results == tmp_path / "default" / "bvf.paper.parquet"
    assert unit.evidence == tmp_path / "default" / "evidence" / "bvf.paper.parquet"
    record = json.loads(record_file("default", bvf.CHAPTER, "paper", tmp_path).read_text())
    assert record["files"] == {part: {"file": path.relative_to(tmp_path / "default").as_posix(),
                                      "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
                               for part, path in (("results", unit.results), ("evidence", unit.evidence))}
    assert record["settings"] == {"criterion": "official", "topics": ["gender"]} and "run" not in record
    back = read_page_outputs("default", bvf.CHAPTER, "paper", tmp_path)
    assert back.unit == unit.unit and back.settings == unit.settings
    assert pd.read_parquet(back.evidence)[["occupation", "r"]].equals(ITEMS)
    assert not list(tmp_path.rglob("*.tmp"))

    again = write_page_outputs("default", bvf.CHAPTER, "paper", results=ROWS.assign(value=[0.3, 0.4]), results_dir=tmp_path)
    assert again.unit != unit.unit and again.evidence is None and not unit.evidence.exists()  # no evidence of another run
    assert read_results(tmp_path)["value"].tolist() == [0.3, 0.4]


@pytest.mark.parametrize("damage, sentence", [
    ("evidence", "the evidence file {evidence} is not the one its run record names (a run stopped while writing, "
                 "or the file was changed); rerun the chapter."),
    ("record", "no run record vouches for it (an older fairnb wrote it, or its run stopped before it finished); "
               "rerun the chapter."),
    ("failed", "the latest run failed (RuntimeError: out of memory (cell [7])); its earlier results are left out."),
])
def test_outputs_that_do_not_belong_together_are_refused_in_one_sentence(tmp_path, damage, sentence):
    """What a run killed between two writes leaves (limit-4 evidence beside limit-2 results), an older fairnb's
    folder, or a rerun that failed: never read as one run's numbers."""
    import json

    from fairnb.results import load_results, read_page_outputs, record_file, write_page_outputs

    unit = write_page_outputs("default", bvf.CHAPTER, results=ROWS, evidence=ITEMS.head(1), results_dir=tmp_path)
    record = record_file("default", bvf.CHAPTER, root=tmp_path)
    if damage == "evidence":  # the evidence of another run, written after this unit's record
        ITEMS.assign(model="default").to_parquet(unit.evidence)
    elif damage == "record":
        record.unlink()
    else:
        stored = json.loads(record.read_text())
        record.write_text(json.dumps({**stored, "run": {"status": "failed", "reason": "RuntimeError: out of memory (cell [7])"}}))
    with pytest.raises(ValueError) as refused:
        read_page_outputs("default", bvf.CHAPTER, results_dir=tmp_path)
    assert str(refused.value) == "The results of bvf on default (quick): " + sentence.format(evidence=unit.evidence)
    table, problems = load_results(tmp_path)
    assert table.empty and problems == [f"The results file {unit.results}: " + sentence.format(evidence=unit.evidence)]
