"""TODO: the method in one paragraph: the paper (its title, authors, venue) and what each module implements.

This template measures which pronoun a model puts after an occupation: the share of *she* among *she* and *he*
(0.5: a fair coin). Replace it with your method; keep the names of the interface
(``fairnb.contract.METHOD_INTERFACE``), which tests/test_common_chapters.py checks for every chapter.
"""
from collections.abc import Mapping
from typing import Any

from fairnb.contract import Allowed, Chapter, Citation, Dataset, Headline, Instances, PaperSetting

from .data import OCCUPATIONS, load_occupations
from .metrics import female_share
from .run import pronoun_probabilities
from .tables import evidence, example_results, results_table, summary, this_run

# quick: sized for a 2-core CPU (the notebook's default); paper: the computation behind the paper's numbers.
# Every preset sets the same keys; a library default of any of them is one of these values.
PRESETS: dict[str, dict[str, Any]] = {"quick": {"limit": 3}, "paper": {"limit": None}}

CHAPTER = Chapter(
    number=9,  # TODO: its place in the book
    key="my_method",  # TODO: the package's name, the results file's and the glue names' prefix
    title="My method",
    notebook="09_my_method.ipynb",
    headlines=(Headline("female_share", "share of she among she and he", "nearer 0.5 is fairer", (0.0, 1.0),
                        "how often the next pronoun after an occupation is she rather than he (0.5 = parity)",
                        items="female_share", interval="none: the mean over the occupations scored"),),
    needs=("scores",),  # what it asks of a model: scores, generate, embeddings
    occupation_score="lean",  # its per-occupation group rows, matched across chapters on the comparison page
    presets=PRESETS,
    allowed={"limit": Allowed("whole", minimum=1, maximum=len(OCCUPATIONS), none=True)},
    paper_settings={"limit": PaperSetting(None, "TODO: the section of the paper that states it", "CPU-sized")},
    paper_work="TODO: what a preset=paper run computes per model, in words",
    citation=Citation("todo2026method", "TODO: the authors", "TODO: the paper's title", "TODO: the venue", 2026),
    datasets=(Dataset("limit", "TODO: the official data", "https://example.org", "TODO: what fairnb ships",
                      sample=False),),
    instances=Instances("female_share", ("prompt",)),
    package=__name__,  # where its data/ ships: fairnb.<key> inside fairnb, this module's name outside it
)


def check_settings(settings: Mapping[str, Any]) -> dict:
    """The run's settings, or one sentence for a value :attr:`CHAPTER.allowed` does not allow (and any rule
    between settings); ``fairnb run`` calls it before any kernel starts."""
    CHAPTER.check_settings(settings)
    return dict(settings)


__all__ = ["CHAPTER", "PRESETS", "OCCUPATIONS", "check_settings", "load_occupations", "female_share",
           "pronoun_probabilities", "results_table", "summary", "evidence", "this_run", "example_results"]
