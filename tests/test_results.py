"""The results schema: levels, declared headlines, atomic round trip; the chapter registry."""
import pandas as pd
import pytest

import fairnb
from fairnb import bvf
from fairnb.results import read_results, write_results


def test_results_round_trip(tmp_path):
    frame = pd.DataFrame({"item": ["all", "nurse"], "metric": ["R", "r"], "value": [0.1, 0.2],
                          "level": ["headline", "group"]})
    path = write_results(frame, "org/model", bvf.CHAPTER, root=tmp_path)
    assert path == tmp_path / "org__model" / "bvf.parquet"
    back = read_results(tmp_path)
    assert back[["model", "chapter", "item", "value", "level"]].values.tolist() == [
        ["org/model", "bvf", "all", 0.1, "headline"], ["org/model", "bvf", "nurse", 0.2, "group"]]
    with pytest.raises(ValueError, match="lacks the columns"):
        write_results(frame.drop(columns="metric"), "m", bvf.CHAPTER, root=tmp_path)


def test_rows_need_a_valid_level_and_declared_headlines(tmp_path):
    frame = pd.DataFrame({"item": ["all"], "metric": ["R"], "value": [0.1], "level": ["overall"]})
    with pytest.raises(ValueError, match="level is not one of"):
        write_results(frame, "m", bvf.CHAPTER, root=tmp_path)
    with pytest.raises(ValueError, match="declares no headline"):
        write_results(frame.assign(level="headline", metric="mean r"), "m", bvf.CHAPTER, root=tmp_path)
    assert not list(tmp_path.rglob("*.parquet"))


def test_registry_names_each_chapter_once():
    chapters = fairnb.chapters()
    assert [c.number for c in chapters] == sorted({c.number for c in chapters})
    assert len({c.key for c in chapters}) == len({c.notebook for c in chapters}) == len(chapters)
    assert fairnb.chapter(3).key == "ucerf" and fairnb.chapter("bvf").number == 1
    with pytest.raises(ValueError, match="Unknown chapter"):
        fairnb.chapter(9)
