"""Chapter 3's figures (paper Figs. 3, 7, 8): one function per figure, each taking ``title=`` and returning the Figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from fairnb.plotting import finished, themed
from fairnb.ucerf.tables import pair_table


@themed
def occupation_fairness(table: pd.DataFrame, title: str = "") -> Figure:
    """Per-occupation UCerF and equalized-odds fairness 1 - EO (the paper's EO, 0-1), sorted by the share of women.

    ``table`` is :func:`fairnb.ucerf.tables.occupation_table` for one task and type. Both
    series lie on [0, 1] with 1 = fair, so the figure shows where EO's error-rate view and
    UCerF's certainty-aware view disagree (UCerF paper Fig. 7).
    """
    table = table.sort_values(["pct_female", "occupation"])
    long = pd.DataFrame({"occupation": list(table["occupation"]) * 2,
                         "fairness": list(table["ucerf"]) + list(1 - table["equalized_odds"]),
                         "metric": ["UCerF"] * len(table) + ["1 - EO"] * len(table)})
    fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(table)), 3.8))
    sns.pointplot(data=long, x="occupation", y="fairness", hue="metric", order=list(table["occupation"]),
                  linestyles=["-", "--"], markers=["o", "s"], ax=ax)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("occupation (share of women rising to the right)")
    ax.tick_params(axis="x", rotation=70, labelsize=8)
    return finished(fig, title, ax)


@themed
def desirability_histograms(scored: pd.DataFrame, title: str = "") -> Figure:
    """UCerF paper Fig. 8: D of pro vs anti sentences and per-pair U(x), one row per task and type.

    ``scored`` is :func:`fairnb.ucerf.run.score_seeds`' output (every task it ran).
    """
    pairs = pair_table(scored)
    settings = sorted(set(zip(scored["task"], scored["type"])))
    fig, axes = plt.subplots(len(settings), 2, figsize=(10, 3.0 * len(settings)), squeeze=False)
    for (d_ax, u_ax), (task, t) in zip(axes, settings):
        sns.histplot(data=scored[(scored["task"] == task) & (scored["type"] == t)], x="desirability", hue="stereotype",
                     hue_order=["pro", "anti"], bins=20, binrange=(-1, 1), element="step", ax=d_ax)
        d_ax.set_title(f"{task} task, type {t}: desirability D")
        sns.histplot(data=pairs[(pairs["task"] == task) & (pairs["type"] == t)], x="ucerf", bins=20, binrange=(0, 1),
                     ax=u_ax)
        u_ax.set_title(f"{task} task, type {t}: per-pair U(x)")
    return finished(fig, title)


@themed
def lsbp_scenarios(table: pd.DataFrame, title: str = "The paper's constructed cases on the desirability scale") -> Figure:
    """Paper Figs. 2-3: each case's pro and anti sentence as pins on the LSBP scale D in [-1, 1].

    ``table`` is :func:`fairnb.ucerf.tables.toy_table`; each row is labelled with its U and EO.
    """
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(table) + 1.2))
    for y, (_name, row) in enumerate(table.iloc[::-1].iterrows()):
        ax.hlines(y, -1, 1, color="0.8", lw=1)
        ax.plot([row["D_pro"]], [y], "o", color="tab:red", label="pro-stereotypical" if y == 0 else None)
        ax.plot([row["D_anti"]], [y], "s", color="tab:blue", label="anti-stereotypical" if y == 0 else None)
        ax.text(1.05, y, f"U = {row['ucerf']:.2f}   EO = {row['equalized_odds']:.2g}", va="center", fontsize=9)
    ax.set_yticks(range(len(table)), list(table.index[::-1]))
    ax.set_xlim(-1.05, 1.6)
    ax.set_xticks([-1, 0, 1], ["-1\nconfidently wrong", "0\nunsure", "1\nconfidently right"])
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.25), ncol=2, frameon=False)
    return finished(fig, title, ax)
