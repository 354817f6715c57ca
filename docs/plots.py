"""Plots of the benchmark results: PNG files under ``docs/img/`` from the benchmarks' CSV files.

Usage::

    python docs/plots.py                        # benchmarks/results/*.csv -> docs/img/*.png
    python docs/plots.py --results DIR --out DIR

Reads what the benchmark scripts wrote (``--out`` of each script; by default
``benchmarks/results/``) and draws, with matplotlib (the ``bench`` extra):

* ``triangles.csv`` -> ``triangles-triangle.png`` and ``triangles-4clique.png``:
  median time against edges, log-log, one colour per contender, one marker per
  graph family (lines join the hub family and the power-law family), timeouts
  as a cross at the timeout value (nudged sideways per contender, so that one
  size's crosses do not hide each other);
* ``beyond_driver.csv`` -> ``beyond_driver-triangle.png`` and
  ``beyond_driver-4clique.png``: the same, for its graph cells (issue 21's benchmark);
* ``incremental.csv`` -> ``incremental.png``: step time (one line per delta size)
  and full recompute time against edges, log-log;
* ``chain_order.csv`` -> ``chain_order.png``: planner against left to right,
  median solve time per chain, bars.

Whatever rows a file has are drawn (skipped and failed cells are counted in a
note under the plot); a missing file is reported and its plot left out.  The
exit status is 0 when at least one plot was written, 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
IMG = ROOT / "docs" / "img"

FAMILY_MARKERS = {"hub": "o", "random": "^", "power-law": "s", "snap": "D"}
JOINED_FAMILIES = ("hub", "power-law")  # a family of growing sizes: join its points
QUERY_TITLES = {
    "triangle": "Triangles: Q() :- E(a, b), E(b, c), E(a, c)",
    "4clique": "4-cliques: Q() :- E(a,b), E(a,c), E(a,d), E(b,c), E(b,d), E(c,d)",
}

Row = dict[str, str]


def read_rows(path: Path) -> list[Row] | None:
    """The rows of a result CSV file, or None when the file does not exist."""
    if not path.is_file():
        return None
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def num(x: str | None) -> float | None:
    """A CSV cell as a number, None when empty or not a number."""
    try:
        return float(x) if x not in (None, "") else None
    except ValueError:
        return None


def in_order(values: list[str]) -> list[str]:
    """Distinct values in order of first appearance."""
    return list(dict.fromkeys(values))


def status_note(rows: list[Row]) -> str:
    """``'3 skipped, 1 error'``-style summary of the cells that are not drawn."""
    counts: dict[str, int] = {}
    for r in rows:
        if r.get("status") in ("skipped", "error"):
            counts[r["status"]] = counts.get(r["status"], 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def plot_triangles(
    rows: list[Row], out: Path, plt: Any, stem: str = "triangles", subtitle: str = ""
) -> list[Path]:
    """One log-log plot of time against edges per query in ``triangles.csv`` (or another
    file of graph cells: ``stem`` names the PNG files, ``subtitle`` goes under the title)."""
    written = []
    for query in in_order([r.get("query") or "triangle" for r in rows]):
        sel = [r for r in rows if (r.get("query") or "triangle") == query]
        drawn = [r for r in sel if r["status"] in ("ok", "timeout") and num(r["edges"])]
        if not drawn:
            print(f"{stem}.csv: no measured cell for {query}; no plot")
            continue
        fig, ax = plt.subplots(figsize=(9, 6))
        colours = plt.get_cmap("tab10")
        contenders = in_order([r["contender"] for r in drawn])  # those with a point
        families = in_order([r.get("family") or "other" for r in drawn])
        timeouts = sorted({t for r in drawn if (t := num(r.get("timeout_s"))) is not None})
        for i, name in enumerate(contenders):
            colour = colours(i % 10)
            mine = [r for r in drawn if r["contender"] == name]
            ax.plot([], [], color=colour, marker="o", label=name)  # legend entry
            for fam in families:
                pts = sorted(
                    (num(r["edges"]), num(r["median_s"]))
                    for r in mine
                    if (r.get("family") or "other") == fam and r["status"] == "ok"
                )
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    style = "-" if fam in JOINED_FAMILIES else "none"
                    ax.plot(
                        xs,
                        ys,
                        linestyle=style,
                        marker=FAMILY_MARKERS.get(fam, "P"),
                        color=colour,
                        markersize=6,
                        alpha=0.85,
                    )
                late = [
                    (num(r["edges"]), num(r.get("timeout_s")) or (timeouts or [1.0])[-1])
                    for r in mine
                    if (r.get("family") or "other") == fam and r["status"] == "timeout"
                ]
                if late:
                    # nudged sideways per contender: crosses at one size hide no other
                    shift = 1.12 ** (i - (len(contenders) - 1) / 2)
                    xs, ys = zip(*((x * shift, y) for x, y in late), strict=True)
                    ax.plot(
                        xs, ys, linestyle="none", marker="x", markersize=10, mew=2.5, color=colour
                    )
        for t in timeouts:
            ax.axhline(t, color="grey", linestyle=":", linewidth=1)
            ax.annotate(
                f"timeout {t:g} s",
                (0.01, t),
                xycoords=("axes fraction", "data"),
                va="bottom",
                fontsize=8,
                color="grey",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("edges")
        ax.set_ylabel("median wall-clock seconds")
        ax.set_title(QUERY_TITLES.get(query, query) + subtitle, fontsize=11)
        ax.grid(True, which="major", alpha=0.3)
        first = ax.legend(
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=8,
            title="contender",
            title_fontsize=8,
        )
        ax.add_artist(first)
        shapes = [
            ax.plot([], [], linestyle="none", marker=FAMILY_MARKERS.get(f, "P"), color="k")[0]
            for f in families
        ]
        shapes.append(ax.plot([], [], linestyle="none", marker="x", mew=2.5, color="k")[0])
        labels = [*families, "timeout (drawn at the limit)"]
        ax.legend(
            shapes,
            labels,
            loc="lower left",
            bbox_to_anchor=(1.01, 0.0),
            fontsize=8,
            title="graph family",
            title_fontsize=8,
        )
        note = status_note(sel)
        if note:
            fig.text(0.01, 0.01, f"not drawn: {note} cells (see the CSV)", fontsize=8)
        path = out / f"{stem}-{query}.png"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def plot_incremental(rows: list[Row], out: Path, plt: Any) -> list[Path]:
    """Step and recompute time against edges, from ``incremental.csv``."""
    keep = [
        r
        for r in rows
        if r["status"] == "ok"
        and num(r["edges"])
        and num(r["median_s"])
        and (r["contender"] == "full recompute" or "step" in r["contender"])
    ]
    if not keep:
        print("incremental.csv: no measured step or recompute; no plot")
        return []
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name in in_order([r["contender"] for r in keep]):
        pts = sorted((num(r["edges"]), num(r["median_s"])) for r in keep if r["contender"] == name)
        xs, ys = zip(*pts, strict=True)
        recompute = name == "full recompute"
        ax.plot(
            xs,
            ys,
            marker="s" if recompute else "o",
            linestyle="-" if recompute else ("--" if name.startswith("Pathway") else "-."),
            linewidth=2.5 if recompute else 1.5,
            label=name,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("edges")
    ax.set_ylabel("median wall-clock seconds")
    ax.set_title("Incremental triangle count: one step against a full recompute", fontsize=11)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    note = status_note(rows)
    if note:
        fig.text(0.01, 0.01, f"not drawn: {note} cells (see the CSV)", fontsize=8)
    path = out / "incremental.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [path]


def plot_chain(rows: list[Row], out: Path, plt: Any) -> list[Path]:
    """Planner against left to right, per chain, from ``chain_order.csv``."""
    keep = [r for r in rows if r["status"] == "ok" and num(r["median_s"])]
    chains = in_order([r["workload"] for r in keep])
    if not chains:
        print("chain_order.csv: no measured solve; no plot")
        return []
    contenders = in_order([r["contender"] for r in keep])
    t = {(r["workload"], r["contender"]): num(r["median_s"]) for r in keep}
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(chains) + 2), 5))
    width = 0.8 / len(contenders)
    for j, name in enumerate(contenders):
        xs = [i + (j - (len(contenders) - 1) / 2) * width for i in range(len(chains))]
        ys = [t.get((c, name)) or 0.0 for c in chains]
        ax.bar(xs, ys, width=width, label=name)
    if {"planner (auto)", "left to right"} <= set(contenders):
        for i, c in enumerate(chains):
            a, b = t.get((c, "planner (auto)")), t.get((c, "left to right"))
            if a and b:
                top = max(a, b)
                ax.annotate(f"×{b / a:.2g}", (i, top), ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(chains)), chains)
    ax.set_ylabel("median solve seconds")
    ax.set_title("Matrix chains: the planner's order against left to right", fontsize=11)
    ax.legend(fontsize=8)
    ax.margins(y=0.15)
    fig.text(0.01, 0.01, "×r above a pair: left-to-right time / planner time", fontsize=8)
    path = out / "chain_order.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [path]


def plot_beyond_driver(rows: list[Row], out: Path, plt: Any) -> list[Path]:
    """``beyond_driver.csv`` -> ``beyond_driver-<query>.png``: its graph cells (the chain
    and Bayesian-network cells have no edge count to plot against), as for triangles."""
    graphs = [r for r in rows if r.get("family") not in ("chain", "bn")]
    return plot_triangles(
        graphs, out, plt, stem="beyond_driver", subtitle="\nevery step on Spark (local_rows=0)"
    )


PLOTS: dict[str, Callable[[list[Row], Path, Any], list[Path]]] = {
    "triangles": plot_triangles,
    "beyond_driver": plot_beyond_driver,
    "incremental": plot_incremental,
    "chain_order": plot_chain,
}


def main(argv: list[str] | None = None) -> int:
    """Write every plot whose CSV exists; 0 when at least one was written."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=str(RESULTS), help="folder of the benchmark CSV files")
    p.add_argument("--out", default=str(IMG), help="folder for the PNG files (docs/img)")
    args = p.parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed (pip install matplotlib, or the bench extra): no plots")
        return 1
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results, out = Path(args.results), Path(args.out)
    written: list[Path] = []
    for name, plot in PLOTS.items():
        path = results / f"{name}.csv"
        rows = read_rows(path)
        if rows is None:
            print(f"missing: {path} (run python benchmarks/{name}.py first); no {name} plot")
            continue
        out.mkdir(parents=True, exist_ok=True)
        made = plot(rows, out, plt)
        for m in made:
            print(f"wrote {m} ({len(rows)} rows of {path.name})")
        written += made
    if not written:
        print("no plot written")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
