"""fairnb's figures carry its style without changing the user's: importing fairnb leaves rcParams alone."""
from __future__ import annotations

import subprocess
import sys

import matplotlib as mpl
import matplotlib.pyplot as plt
import seaborn as sns

import fairnb
from fairnb.plotting import finished, theme, themed

ALL_PLOTS = ["fairnb", *(f"fairnb.{chapter.key}.plots" for chapter in fairnb.chapters()), "fairnb.comparison.plots"]


def test_importing_fairnb_and_its_plots_leaves_rcparams_unchanged():
    script = ("import matplotlib as mpl, importlib, sys\n"
              "before = {k: repr(v) for k, v in mpl.rcParams.items()}\n"
              f"for name in {ALL_PLOTS!r}: importlib.import_module(name)\n"
              "changed = sorted(k for k, v in mpl.rcParams.items() if repr(v) != before[k])\n"
              "sys.exit(str(changed) if changed else 0)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_theme_is_what_set_theme_would_set():
    with mpl.rc_context():
        sns.set_theme(style="whitegrid", context="notebook")
        expected = dict(mpl.rcParams)
    with mpl.rc_context(theme()):
        assert dict(mpl.rcParams) == expected
    assert mpl.rcParams["axes.grid"] is False  # back to matplotlib's default


def test_a_themed_figure_has_the_style_and_the_shared_tail():
    @themed
    def draw():
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        return finished(fig, "a title", ax)

    fig = draw()
    ax = fig.axes[0]
    assert ax.get_title() == "a title"
    assert ax.get_facecolor()[:3] == (1.0, 1.0, 1.0) and ax.yaxis.get_gridlines()[0].get_visible()
    assert mpl.colors.to_hex(ax.lines[0].get_color()) == sns.color_palette("deep").as_hex()[0]
    assert not mpl.rcParams["axes.grid"]
    plt.close("all")
