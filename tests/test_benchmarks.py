"""Smoke tests of the benchmark scripts: reference counters, the GraphFrames algorithm,
the result files, missing optional packages and the plots.  No timing is asserted."""

from __future__ import annotations

import argparse
import csv
import importlib.util
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks import _common, triangles
from faq.io import load_edge_array, undirected_simple
from faq.testing import hub_graph, power_law_graph, random_graph, triangle_count_numpy

ROOT = Path(__file__).resolve().parent.parent
KARATE = ROOT / "tests" / "data" / "karate.txt"


def brute_force_cliques(edges: np.ndarray, k: int) -> int:
    """k-cliques by trying every k-subset of the vertices."""
    adj = {(int(u), int(v)) for u, v in edges} | {(int(v), int(u)) for u, v in edges}
    nodes = sorted({int(x) for x in edges.ravel()})
    return sum(
        all((a, b) in adj for a, b in itertools.combinations(c, 2))
        for c in itertools.combinations(nodes, k)
    )


# -- reference counts ------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_clique_count_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 13))
    m = int(rng.integers(1, n * (n - 1) // 2 + 1))
    e = random_graph(n, m, seed=seed)
    for k in (3, 4, 5):
        assert triangles.clique_count_numpy(e, k) == brute_force_cliques(e, k), (n, m, k)


def test_clique_count_ignores_orientation_loops_and_duplicates():
    k4 = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
    messy = np.concatenate([k4, k4[:, ::-1], [[2, 2], [0, 1]]])
    assert triangles.clique_count_numpy(messy, 4) == 1
    assert triangles.clique_count_numpy(messy, 3) == 4
    assert triangles.clique_count_numpy(np.empty((0, 2), dtype=np.int64), 4) == 0
    # small blocks exercise the blocked loops
    e = power_law_graph(200, 1200, seed=3)
    assert triangles.clique_count_numpy(e, 4, block=50) == triangles.clique_count_numpy(e, 4)


def test_clique_count_matches_networkx_and_triangle_oracle():
    nx = pytest.importorskip("networkx")
    e = undirected_simple(load_edge_array(KARATE))
    G = nx.Graph(e.tolist())
    by_size: dict[int, int] = {}
    for c in nx.enumerate_all_cliques(G):
        by_size[len(c)] = by_size.get(len(c), 0) + 1
    for k in (3, 4, 5):
        assert triangles.clique_count_numpy(e, k) == by_size.get(k, 0)
    assert triangles.reference_count(e, "triangle") == 45
    h = hub_graph(50)
    assert triangles.reference_count(h, "4clique") == 0
    assert triangles.clique_count_numpy(h, 3) == triangle_count_numpy(h) == 101


def test_in_memory_contenders_agree():
    args = triangles.parse_args(["--quick"])
    c = triangles.Contenders(args)
    c.load(power_law_graph(300, 2000, seed=1))
    for query in ("triangle", "4clique"):
        want = triangles.reference_count(c.edges, query)
        for name in ("scipy", "networkx", "graphblas"):
            if c.unavailable(name, query, len(c.edges)) is None:
                got, jobs, seconds = c.run(name, query, 60)
                assert (got, jobs) == (want, None), (name, query)
                assert seconds >= 0


# -- Spark: the GraphFrames algorithm and the job count --------------------------------------
def test_graphframes_algorithm_and_job_count(spark):
    """One tiny Spark run: the algorithm on a messy edge list, through the job counter."""
    e = undirected_simple(load_edge_array(KARATE))
    messy = np.concatenate([e, e[:5, ::-1], [[3, 3]]])  # reversed duplicates, a self-loop
    args = triangles.parse_args(["--quick", "--contenders", "graphframes"])
    c = triangles.Contenders(args)
    c.spark = spark
    c.df = spark.createDataFrame([(int(u), int(v)) for u, v in messy], "src bigint, dst bigint")
    count, jobs, seconds = c.run("graphframes", "triangle", 300)
    assert count == 45 and seconds > 0
    assert jobs is not None and jobs >= 1
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


# -- result files ----------------------------------------------------------------------------
def test_write_results_csv_and_json(tmp_path):
    rows = [
        _common.Result(
            "g", "engine (auto)", edges=10, times=[2.0, 1.0, 3.0], count=5, spark_jobs=7
        ),
        _common.Result("g", "DuckDB", edges=10, times=[0.5], count=5, extra={"query": "triangle"}),
        _common.Result("g", "GraphBLAS", edges=10, status="skipped", note="not installed"),
        _common.Result("g", "Spark SQL", edges=10, status="timeout", note="cancelled at 3 s"),
    ]
    _common.set_ratios(rows, "engine (auto)")
    csv_path, json_path = _common.write_results(rows, tmp_path / "new", "demo", {"x": 1})
    with csv_path.open() as fh:
        got = list(csv.DictReader(fh))
    header = list(got[0])
    assert header[: len(_common.COLUMNS)] == list(_common.COLUMNS) and header[-1] == "query"
    assert got[0]["median_s"] == "2" and got[0]["runs"] == "3" and got[0]["spark_jobs"] == "7"
    assert got[1]["ratio"] == "0.25" and got[1]["baseline"] == "engine (auto)"
    assert [r["status"] for r in got] == ["ok", "ok", "skipped", "timeout"]
    assert got[3]["median_s"] == "" and got[3]["ratio"] == ""
    data = json.loads(json_path.read_text())
    assert data["meta"] == {"x": 1} and len(data["rows"]) == 4
    with pytest.raises(ValueError, match="status"):
        _common.Result("g", "x", status="n/a").as_row()


def run_triangles_without_spark(tmp_path: Path, contenders: str) -> list[dict[str, str]]:
    argv = [
        *("--contenders", contenders, "--hub-n", "5", "--random-edges", "0", "--power-edges"),
        *("--query", "both", "--no-warmup", "--repeat", "2", "--warmups", "1"),
        *("--out", str(tmp_path), str(KARATE)),
    ]
    assert triangles.main(argv) == 0
    with (tmp_path / "triangles.csv").open() as fh:
        return list(csv.DictReader(fh))


def test_missing_peer_is_skipped_with_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "duckdb", None)  # makes ``import duckdb`` fail
    monkeypatch.setitem(sys.modules, "networkx", None)
    rows = run_triangles_without_spark(tmp_path, "duckdb,networkx,numpy")
    out = capsys.readouterr().out
    assert "duckdb is not installed" in out and "networkx is not installed" in out
    assert "skipped: not installed" in out
    by = {(r["workload"], r["query"], r["contender"]): r for r in rows}
    assert len(rows) == 2 * 2 * 3
    for w in ("hub n=5", "karate"):
        for q in ("triangle", "4clique"):
            assert by[(w, q, "DuckDB")]["status"] == "skipped"
            assert by[(w, q, "DuckDB")]["note"] == "not installed"
            ref = by[(w, q, "numpy reference")]
            assert ref["status"] == "ok" and ref["runs"] == "2" and ref["correct"] == "True"
    assert by[("karate", "triangle", "numpy reference")]["count"] == "45"
    assert by[("hub n=5", "triangle", "numpy reference")]["count"] == "11"


def test_snap_folder_and_quick_arguments(tmp_path):
    (tmp_path / "b.txt").write_text("# c\r\n1 2\r\n2 3\r\n1 3")  # CRLF, no final newline
    (tmp_path / "a.txt").write_text("0 1\n")
    (tmp_path / "notes.md").write_text("not an edge list\n")
    args = triangles.parse_args(["--quick", "--snap", str(tmp_path), "--query", "4clique"])
    assert [Path(p).name for p in args.paths] == ["a.txt", "b.txt"]
    assert args.queries == ["4clique"] and args.repeat == 1 and args.timeout == 60
    args.hub_n, args.random_edges, args.power_edges = [], 0, []
    loads = triangles.workloads(args)
    assert [(w.name, w.m) for w in loads] == [("a", 1), ("b", 3)]


# -- the other scripts -----------------------------------------------------------------------
def test_chain_order_and_incremental_pure_parts():
    from benchmarks import chain_order, incremental

    s, cost, _ = chain_order.multi_dot_order((10, 100, 5, 50))
    assert chain_order.split_to_order(s, 3) == ("j", "k")  # (AB)C
    assert cost == 10 * 100 * 5 + 10 * 5 * 50
    row = {
        "graph": "g",
        "edges": 6,
        "triangles": 1,
        "build": 1.0,
        "build_jobs": 3,
        "recompute": 2.0,
        "recompute_jobs": 4,
        "step_times": {10: [0.4, 0.5, 0.6]},
        "step_jobs": {10: 2},
        "where": ["driver"],
    }
    got = {r.contender: r for r in incremental.results_of([row], [10], 3)}
    assert got["step Δ=10"].median_s == 0.5 and got["step Δ=10"].ratio == 0.25
    assert got["Pathway step Δ=10"].status == "skipped"
    rng = np.random.default_rng(0)
    edges = {(0, 1), (1, 2), (0, 2)}
    d = incremental.make_delta(edges, 10, 4, rng)
    assert len(d) == 4 and sorted(d[:, 2].tolist()) == [-1, -1, 1, 1]
    from faq import TermReport

    terms = [
        TermReport(0, False, "driver"),
        TermReport(1, skipped=True),
        TermReport(2, False, "spark"),
    ]
    assert incremental.where_of(terms) == ["?", "driver", "spark"]


def test_view_resources_rows_and_restored_engine(spark, tmp_path):
    """A short run of each view contender: rows at the asked ticks, the count checked
    against numpy inside ``run``, and the engine's functions put back afterwards."""
    import incremental.spark_keyed as spark_keyed
    from benchmarks import view_resources

    free, settle = spark_keyed.free_checkpoints, spark_keyed.SparkContext.settle
    for contender in ("view frees its checkpoints", "cleaner only"):
        rows = view_resources.run(spark, contender, 3, 2, str(tmp_path), 40, 120)
        assert [r.extra["tick"] for r in rows] == [2, 3]
        assert rows[-1].count is not None and rows[-1].count >= 0
        assert all(r.extra["cached_blocks"] >= 0 and r.median_s > 0 for r in rows)
        assert "| " + contender + " | 3 |" in view_resources._line(rows[-1])
    assert spark_keyed.free_checkpoints is free and spark_keyed.SparkContext.settle is settle


def test_view_resources_refuses_a_setting_without_a_value(capsys):
    from benchmarks import view_resources

    with pytest.raises(SystemExit) as exc:
        view_resources.main(["--conf", "spark.ui.retainedJobs"])
    assert exc.value.code == 2
    assert "--conf takes KEY=VALUE" in capsys.readouterr().err


def test_script_runs_as_a_file(tmp_path):
    """``python benchmarks/triangles.py`` finds ``benchmarks._common`` (no Spark contender)."""
    cmd = [
        *(sys.executable, str(ROOT / "benchmarks" / "triangles.py")),
        *("--contenders", "numpy", "--hub-n", "3", "--random-edges", "0", "--power-edges"),
        *("--query", "triangle", "--no-warmup", "--out", str(tmp_path)),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "All counts agree" in proc.stdout and (tmp_path / "triangles.json").is_file()
    helps = [sys.executable, str(ROOT / "benchmarks" / "incremental.py"), "--help"]
    assert subprocess.run(helps, capture_output=True, timeout=300).returncode == 0


def test_paired_ticks_time_the_durable_work_within_each_tick(tmp_path):
    """``benchmarks/incremental.py --durable``: each tick on a durable view and a plain one,
    and the durable tick's own commit as the view timed it, never more than the tick."""
    from benchmarks import incremental as bench
    from faq import query
    from incremental import IncrementalView

    edges = power_law_graph(60, 300, seed=3)
    tri = query("Q() :- E(a, b), E(b, c), E(a, c)", semiring="counting")
    rows = pd.DataFrame(edges, columns=["src", "dst"])
    durable = IncrementalView(tri, state_dir=tmp_path / "v", E=rows)
    plain = IncrementalView(tri, E=rows)
    present = {(int(u), int(v)) for u, v in edges}
    rng = np.random.default_rng(0)
    seq = []
    for size in (1, 5, 1, 5):
        d = bench.make_delta(present, 60, size, rng)
        bench.apply(present, d)
        seq.append((size, "pandas", d))
    dtimes, ptimes, waits, commits = bench.paired_ticks(durable, plain, seq)
    assert sorted(dtimes) == sorted(ptimes) == sorted(waits) == sorted(commits) == [1, 5]
    for size in (1, 5):
        assert len(commits[size]) == 2
        assert all(0 < c <= t for c, t in zip(commits[size], dtimes[size], strict=True))
        assert bench.commit_share(dtimes[size], commits[size]) > 0
    assert durable.result().scalar() == plain.result().scalar()
    want = triangle_count_numpy(np.asarray(sorted(present), dtype=np.int64))
    assert durable.result().scalar() == want
    durable.close()


def test_incremental_script_with_spark_deltas_and_the_spark_state(spark, tmp_path, capsys):
    """``benchmarks/incremental.py`` on a tiny graph with pandas and Spark deltas and the
    Spark-resident state past its fetch bound, in the shared session."""
    from benchmarks import incremental as bench

    argv = ["--sizes", "300", "--deltas", "1", "5", "--ticks", "1", "--input", "pandas"]
    argv += ["spark", "--spark-state", "--spark-fetch-rows", "0", "--out", str(tmp_path)]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "step Δ=5 (pandas)" in out and (tmp_path / "incremental.json").is_file()
    assert "Ticks under max_fetch_rows=0." in out  # the Spark state's delta queries
    assert "`collect()` of a fresh Spark DataFrame of a tick's rows alone" in out


def test_every_benchmark_script_defines_its_helpers_before_it_runs():
    """Each script under ``benchmarks/`` run as a file (``python benchmarks/X.py``) runs its
    ``if __name__ == "__main__":`` block last, so every helper ``main`` calls is defined by
    then (``where_of`` once sat below that block in ``incremental.py``: a run as a file
    failed, an import did not)."""
    import ast

    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        mains = [
            i
            for i, node in enumerate(body)
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        ]
        assert mains in ([], [len(body) - 1]), f"{path.name}: the __main__ block is not last"


def test_ticks_graphs_and_deltas():
    """``benchmarks/ticks.py``'s Chung–Lu graphs and tick deltas: simple oriented graphs,
    hubs at low ids unless shuffled; 30% deletions of present edges, insertions of absent."""
    from benchmarks import ticks

    low = ticks.chung_lu(2000, 8000, 2.3, seed=1)
    mixed = ticks.chung_lu(2000, 8000, 2.3, seed=1, shuffle=True)
    for e in (low, mixed):
        assert e.shape == (8000, 2) and bool((e[:, 0] < e[:, 1]).all())
        assert len(np.unique(e, axis=0)) == 8000
    deg_low = np.bincount(low.ravel(), minlength=2000)
    deg_mixed = np.bincount(mixed.ravel(), minlength=2000)
    assert int(deg_low.argmax()) < 5 and deg_low[:10].sum() > 10 * deg_low[-10:].sum()
    assert sorted(deg_low) == sorted(deg_mixed) and not np.array_equal(deg_low, deg_mixed)
    rng = np.random.default_rng(3)
    for inserts in ("degree", "uniform"):
        pool = ticks.EdgePool(low, 2000)
        present = {(int(u), int(v)) for u, v in low}
        kinds = []
        for size in (1,) * 40 + (1000, 10):
            d = ticks.make_delta(pool, size, rng, inserts)
            assert len(d) == size and len({(u, v) for u, v, _ in d.tolist()}) == size
            if size == 1000:
                assert int((d[:, 2] < 0).sum()) == 300
            for u, v, w in d.tolist():
                assert u < v and ((u, v) in present) == (w < 0)
                (present.discard if w < 0 else present.add)((u, v))
            kinds.append(int(d[0, 2]))
        assert -1 in kinds and 1 in kinds  # one-edge ticks: both deletions and insertions
        assert {(int(u), int(v)) for u, v in pool.current()} == present


def test_ticks_settings_and_a_thread_beside(capsys):
    """``--set NAME=VALUE`` takes a faq setting the settings' own checks accept (else an
    argparse error naming it); ``--beside python`` runs a Python thread for the block."""
    import threading

    from benchmarks import ticks

    args = ticks.parse_args(["--quick", "--set", "gil_rows=0", "--set", "log_fraction=0.1"])
    assert args.set == [("gil_rows", 0), ("log_fraction", 0.1)]
    for bad, says in (("bogus=1", "NAME a faq setting"), ("gil_rows=-1", "non-negative")):
        with pytest.raises(SystemExit):
            ticks.parse_args(["--quick", "--set", bad])
        assert says in capsys.readouterr().err

    def busy() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "ticks-beside"]

    with ticks.beside("python"):
        assert len(busy()) == 1 and busy()[0].is_alive()
    assert not busy()  # stopped and joined
    with ticks.beside("none"):
        assert not busy()


def test_ticks_script_quick(tmp_path):
    """``python benchmarks/ticks.py --quick``: tables, a checked count, the result files, and
    the one-edge ticks run again after the larger ones (``--after``, on by default)."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "ticks.py"), "--quick", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("triangles at the end (checked)") == 3
    assert "| 1,000 | 5 |" in proc.stdout and "target 1,000×" in proc.stdout
    rows = json.loads((tmp_path / "ticks.json").read_text())["rows"]
    tick = [r for r in rows if r["contender"] == "tick Δ=1"]
    assert len(tick) == 3 and all(r["runs"] == 20 and r["p50_s"] > 0 for r in tick)
    assert all(r["max_s"] >= r["p99_s"] >= r["p50_s"] for r in tick)
    assert {r["contender"] for r in rows} == {
        "build",
        "recompute (local factor)",
        "tick Δ=1",
        "tick Δ=1000",
        "tick Δ=1 after the larger",
    }
    after = [r for r in rows if r["contender"] == "tick Δ=1 after the larger"]
    assert len(after) == 3 and all(r["runs"] == 20 and r["after_larger"] for r in after)
    assert "| 1 after the larger | 20 |" in proc.stdout


def test_spark_ticks_script_quick(spark, tmp_path, capsys):
    """``benchmarks/spark_ticks.py --quick``, in this session: the Spark state with pandas
    and Spark deltas and the driver state with Spark deltas tick, the counts are checked
    against numpy, and the table and result files hold every contender."""
    from benchmarks import spark_ticks

    assert spark_ticks.main(["--quick", "--ticks", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 1 | spark | pandas |" in out and "| 1 | driver | Spark |" in out
    rows = json.loads((tmp_path / "spark_ticks.json").read_text())["rows"]
    ticks = [r for r in rows if r["contender"].startswith("tick")]
    assert [(r["state"], r["input"]) for r in ticks] == [
        ("spark", "pandas"),
        ("spark", "Spark"),
        ("driver", "Spark"),
    ]
    assert all(r["runs"] == 2 and r["max_s"] >= r["p50_s"] > 0 for r in ticks)
    assert ticks[1]["collect_p50_s"] > 0 and ticks[0]["collect_p50_s"] is None
    assert "base rows fetched from Spark per tick" in out
    assert len(ticks[0]["rows_fetched"]) == 2 and ticks[1]["rows_fetched"] is None
    fetched, kept = ticks[0]["rows_fetched"], ticks[0]["rows_kept"]
    assert all(f + k > 0 for f, k in zip(fetched, kept, strict=True))
    assert {r["contender"] for r in rows if r["contender"].startswith("recompute")} == {
        "recompute (local factor)",
        "recompute (Spark DataFrame)",
    }


# -- plots -----------------------------------------------------------------------------------
def load_plots():
    spec = importlib.util.spec_from_file_location("docs_plots", ROOT / "docs" / "plots.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plots_from_whatever_csv_exists(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    plots = load_plots()
    res = [
        _common.Result(f"hub n={n}", "engine (auto)", edges=4 * n + 3, times=[t], extra=x)
        for n, t, x in ((10, 1.0, {}), (100, 2.0, {}))
    ]
    for r in res:
        r.extra.update(query="triangle", family="hub", timeout_s=3.0)
    res.append(
        _common.Result(
            "hub n=100",
            "Spark SQL",
            edges=403,
            status="timeout",
            extra={"query": "triangle", "family": "hub", "timeout_s": 3.0},
        )
    )
    res.append(
        _common.Result("CA", "DuckDB", edges=50, status="skipped", extra={"query": "4clique"})
    )
    _common.write_results(res, tmp_path, "triangles", {})
    inc = [
        _common.Result(f"g{m}", c, edges=m, times=[t])
        for m in (100, 1000)
        for c, t in (("full recompute", 2.0), ("step Δ=10", 0.1))
    ]
    _common.write_results(inc, tmp_path, "incremental", {})
    assert plots.main(["--results", str(tmp_path), "--out", str(tmp_path / "img")]) == 0
    out = capsys.readouterr().out
    assert "missing:" in out and "chain_order.csv" in out
    assert "no measured cell for 4clique" in out
    made = sorted(p.name for p in (tmp_path / "img").iterdir())
    assert made == ["incremental.png", "triangles-triangle.png"]
    assert plots.main(["--results", str(tmp_path / "none"), "--out", str(tmp_path)]) == 1


def test_quick_arguments_are_an_argparse_namespace():
    args = triangles.parse_args(["--quick", "--hub-n", "100", "1000"])
    assert isinstance(args, argparse.Namespace)
    assert args.hub_n == [100] and args.power_edges == [10_000] and args.warmups == 0


# -- recursion: shortest paths and reachability ----------------------------------------------
def test_recursion_contenders_agree_on_a_small_directed_graph(spark, tmp_path, capsys):
    """The whole script on a random directed edge list (cycles, nodes the source does not
    reach, a self-loop, a repeated line): ``main`` compares every answer and raises on a
    difference; the rounds of the engine and of the PySpark iteration match."""
    pytest.importorskip("scipy.sparse.csgraph")
    from benchmarks import recursion

    pairs = np.random.default_rng(3).integers(0, 12, (22, 2))
    lines = [f"{u} {v}" for u, v in pairs] + ["4 4", f"{pairs[0][0]} {pairs[0][1]}"]
    path = tmp_path / "g.txt"
    path.write_text("# directed\n" + "\n".join(lines) + "\n")
    argv = ["--edges", "0", "--no-warmup", "--checkpoint-every", "2", "--out", str(tmp_path)]
    view = ["--quick", "--tick-edges", "10", "--tick-deletions", "4"]  # 2 ticks
    assert recursion.main([*argv, *view, str(path)]) == 0
    out = capsys.readouterr().out
    assert "| g.txt |" in out and "PySpark ÷ engine" in out and "recompute ÷ tick" in out
    with (tmp_path / "recursion.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["query"], r["contender"]) for r in rows] == [
        (q, c)
        for q in ("sssp", "reach")
        for c in ("engine", "engine (pandas input)", "PySpark iteration", "scipy")
    ] + [("sssp view", "view tick"), ("sssp view", "recompute")]
    assert all(r["status"] == "ok" for r in rows)
    ticks = [r for r in rows if r["query"] == "sssp view"]
    assert [int(r["runs"]) for r in ticks] == [2, 2]  # every tick compared with a recompute
    rows = rows[:-2]
    g = recursion.weighted_graph("g", pairs, 1, both=False)
    assert g.m == len({(int(u), int(v)) for u, v in pairs if u != v}) == int(rows[0]["edges"])
    for q in ("sssp", "reach"):
        by = {r["contender"]: r for r in rows if r["query"] == q}
        assert 1 < int(by["engine"]["count"]) < 12  # some nodes are not reached
        assert len({r["count"] for r in by.values()}) == 1
        assert int(by["engine"]["rounds"]) == int(by["PySpark iteration"]["rounds"]) + 1


def test_recursion_compare_refuses_different_answers():
    from benchmarks.recursion import Answer, compare

    a = Answer(np.array([0, 1, 2]), np.array([0.0, 3.0, 4.0]))
    compare("sssp", "g", {"x": a, "y": Answer(a.nodes.copy(), a.dist.copy())})
    with pytest.raises(AssertionError, match="disagree on 1 distances, e.g. node 2: 5.0 and 4.0"):
        compare("sssp", "g", {"x": a, "y": Answer(a.nodes, np.array([0.0, 3.0, 5.0]))})
    with pytest.raises(AssertionError, match="reach different nodes"):
        compare("reach", "g", {"x": a, "y": Answer(np.array([0, 1]))})


def test_recursion_weighted_graph_directions_and_source():
    from benchmarks.recursion import weighted_graph

    e = np.array([[0, 1], [1, 2], [2, 2], [0, 1], [1, 3]])
    one_way = weighted_graph("g", e, seed=0, both=False)
    assert one_way.src.tolist() == [0, 1, 1] and one_way.dst.tolist() == [1, 2, 3]
    assert one_way.source == 1 and set(one_way.weight.tolist()) <= set(range(1, 101))
    two_way = weighted_graph("g", e, seed=0, both=True, source=3)
    assert two_way.m == 6 and two_way.source == 3
    with pytest.raises(ValueError, match="no edges besides self-loops"):
        weighted_graph("loops", np.array([[5, 5]]), seed=0, both=True)


# -- beyond the driver: graphs, chains and a network on Parquet ------------------------------
TINY_BIF = """// a comment
network tiny {
}
variable Rain {
  type discrete [ 2 ] { yes, no };
}
variable Wet {
  type discrete [ 3 ] { dry, damp, soaked };
}
probability ( Rain ) {
  table 0.2, 0.8;
}
probability ( Wet | Rain ) {
  (yes) 0.1, 0.3, 0.6;
  (no) 0.7, 0.3, 0.0;
}
"""


def test_beyond_driver_chain_products_match_dense():
    """The numpy product of the chain helper against dense real and min-plus products,
    and the checksum that compares answers."""
    from benchmarks import _chains

    dims = _chains.chain_dims(60, (1, 6, 1, 6))
    assert dims == (60, 10, 60, 10) and _chains.einsum_spec(3) == "ij,jk,kl->il"
    assert _chains.dense_bytes(dims) == 60 * 60 * 8
    for semiring in _chains.SEMIRINGS:
        mats = _chains.random_chain(dims, 3, semiring, seed=4)
        assert [m.nnz for m in mats] == [30, 30, 30]  # 3 per row of the narrow side
        dense = []
        for m in mats:
            d = np.full((m.rows, m.cols), 0.0 if semiring == "real" else np.inf)
            d[m.r, m.c] = m.v
            dense.append(d)
        want = dense[0]
        for d in dense[1:]:
            want = want @ d if semiring == "real" else (want[:, :, None] + d[None]).min(axis=1)
        stored = want[want != 0] if semiring == "real" else want[np.isfinite(want)]
        got = _chains.reference(mats, semiring)
        assert _chains.checksum(stored).differs(got) is None, semiring
        assert got.entries > 0
    ref = _chains.Checksum(3, 1.5, 0.25)
    assert ref.differs(_chains.Checksum(3, 1.5 + 1e-13, 0.25)) is None
    assert "2 entries" in ref.differs(_chains.Checksum(2, 1.5, 0.25))
    assert "sum to" in ref.differs(_chains.Checksum(3, 1.6, 0.25))
    assert "smallest" in ref.differs(_chains.Checksum(3, 1.5, 0.5))
    with pytest.raises(ValueError, match="semiring"):
        _chains.random_chain(dims, 2, "counting")


def test_beyond_driver_reads_a_bif_network(tmp_path):
    import gzip

    from benchmarks import _bn

    path = tmp_path / "tiny.bif.gz"
    path.write_bytes(gzip.compress(TINY_BIF.encode()))
    net = _bn.read_bif(path)
    assert net.name == "tiny" and net.states["Wet"] == ("dry", "damp", "soaked")
    np.testing.assert_allclose(_bn.marginal_numpy(net, "Wet"), [0.58, 0.3, 0.12])
    rule, names = _bn.rule(net, "Wet")
    assert rule == "Q(x1) :- P0(x0), P1(x0, x1)" and names == ["P0", "P1"]
    wet = _bn.tables(net)[1]  # the zero probability is left out
    assert wet["c0"].tolist() == [0, 0, 0, 1, 1] and wet["value"].sum() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="not a variable"):
        _bn.rule(net, "Sun")
    (tmp_path / "bad.bif").write_text(TINY_BIF.replace("( Wet | Rain )", "( Wet | Sun )"))
    with pytest.raises(ValueError, match="unknown variable 'Sun'"):
        _bn.read_bif(tmp_path / "bad.bif")


def test_peak_rss_sees_an_allocation():
    from benchmarks._cells import PeakRss, rss_bytes

    if rss_bytes() is None:
        pytest.skip("no /proc/self/status")
    with PeakRss(interval=0.01) as mem:
        block = np.ones(80_000_000 // 8)  # 80 MB, written
        # held for several sampling intervals: a spike shorter than one can be missed (as
        # PeakRss says), and an 80 MB fill and free can take less than one (a CI flake)
        time.sleep(0.1)
        del block
    assert mem.peak_mb is not None and mem.peak_mb > 60


def run_beyond_driver(tmp_path: Path, *args: str) -> tuple[int, dict[tuple[str, ...], dict]]:
    from benchmarks import beyond_driver

    status = beyond_driver.main(["--quick", "--power-edges", "--out", str(tmp_path), *args])
    with (tmp_path / "beyond_driver.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    header = list(rows[0])
    assert header[: len(_common.COLUMNS)] == list(_common.COLUMNS)
    assert {"query", "family", "expected", "correct", "peak_driver_mb"} <= set(header)
    return status, {(r["workload"], r["query"], r["contender"]): r for r in rows}


def test_beyond_driver_quick_run(spark, tmp_path, capsys):
    """Triangles and 4-cliques on karate and a small real chain: every contender's answer
    agrees with the reference; each cell has its jobs and driver memory; summary lines."""
    argv = ("--chain", "--chain-n", "300", "--semirings", "real", "--contenders")
    status, by = run_beyond_driver(tmp_path, *argv, "engine,sql,graphframes", str(KARATE))
    out = capsys.readouterr().out
    assert status == 0 and "All answers agree" in out
    engine, sql = "engine (local_rows=0)", "Spark SQL"
    for query, want, names in (
        ("triangle", 45, (engine, sql, "GraphFrames algorithm")),
        ("4clique", 11, (engine, sql)),
    ):
        for name in names:
            r = by[("karate", query, name)]
            assert (r["status"], r["count"], r["correct"]) == ("ok", str(want), "True"), r
            assert int(r["spark_jobs"]) >= 1 and r["peak_driver_mb"] != ""
            assert r["ratio"] != "" and r["baseline"] == engine
    assert by[("karate", "4clique", "GraphFrames algorithm")]["status"] == "skipped"
    chain = [by[("chain n=300", "real", n)] for n in (engine, sql)]
    assert all(r["correct"] == "True" for r in chain)
    assert chain[0]["count"] == chain[1]["count"] == chain[0]["expected"] != "0"
    assert len(by) == 8 and out.count("engine vs best Spark peer: ") == 3


def test_beyond_driver_mllib_chain(spark):
    """MLlib's BlockMatrix chain (dense blocks) against the reference checksum."""
    from benchmarks import _chains

    dims = (30, 5, 30, 5)
    mats = _chains.random_chain(dims, 3, "real", seed=2)
    frames = [
        spark.createDataFrame(
            [(int(r), int(c), float(v)) for r, c, v in zip(m.r, m.c, m.v, strict=True)],
            "row bigint, col bigint, value double",
        )
        for m in mats
    ]
    got = _chains.mllib_chain(frames, dims, block=8)
    ref = _chains.reference(mats, "real")
    assert ref.entries > 0 and ref.differs(got) is None


def test_beyond_driver_flags_a_wrong_count(spark, tmp_path, monkeypatch, capsys):
    from benchmarks import beyond_driver

    monkeypatch.setattr(beyond_driver, "reference_count", lambda edges, query: 44)
    argv = ("--query", "triangle", "--contenders", "engine", str(KARATE))
    status, by = run_beyond_driver(tmp_path, *argv)
    assert status == 1 and "MISMATCH" in capsys.readouterr().out
    r = by[("karate", "triangle", "engine (local_rows=0)")]
    assert (r["count"], r["expected"], r["correct"]) == ("45", "44", "False")


def test_tick_profile_names_the_delta_rule_and_checks_the_count(spark, tmp_path):
    """benchmarks/tick_profile.py on a small graph: the profile shows the tick's own
    functions (the view's step and its delta rule), for pandas and Spark deltas; with a
    state_dir (``--durable``), also the commit (the tick's intent, then its frame); with the
    Spark-resident state (``--state spark``), its fetch of the rows a tick reads, and past
    the fetch bound (``--fetch-rows 0``) the delta queries run in Spark."""
    from benchmarks.tick_profile import profile_ticks

    for kind in ("pandas", "spark"):
        per_tick, lines = profile_ticks(spark, 2000, 20, kind, ticks=3, warmup=1, top=40)
        assert per_tick > 0
        assert "view.py" in lines and "(step)" in lines and "delta_rule" in lines, lines
        assert "journal.py" not in lines
    _, lines = profile_ticks(spark, 2000, 1, "pandas", 3, 1, 60, state_dir=str(tmp_path / "s"))
    assert "store.py" in lines and "(intend)" in lines and "(save_tick)" in lines, lines
    _, lines = profile_ticks(spark, 2000, 20, "pandas", 2, 1, 80, state="spark")
    assert "spark_state.py" in lines and "reach.py" in lines and "(gather)" in lines, lines
    # past the fetch bound: the delta queries run as Spark jobs (faq.delta's Spark path)
    _, lines = profile_ticks(spark, 2000, 20, "pandas", 2, 1, 120, state="spark", fetch_rows=0)
    assert "delta.py" in lines and "(_spark)" in lines, lines


def test_tick_profile_times_the_delta_rule_without_a_profiler(spark, capsys):
    """``--no-profile``: the ticks timed without cProfile, the median tick and the median
    of its delta rule, a part of it (a Spark state's fetch is not in it); the count is
    still checked against numpy."""
    from benchmarks.tick_profile import main, time_ticks

    for state in ("driver", "spark"):
        tick, rule = time_ticks(spark, 2000, 20, "pandas", 3, 1, state=state)
        assert 0 < rule < tick, (state, tick, rule)
    argv = ["--edges", "2000", "--delta", "20", "--ticks", "2", "--warmup", "1", "--no-profile"]
    assert main([*argv, "--state", "spark"]) == 0
    out = capsys.readouterr().out
    assert "its delta rule" in out and "spark state" in out and "no profiler" in out, out


def test_beyond_driver_floor_reads_every_row_in_one_job(spark, tmp_path, capsys):
    """The ``floor`` contender (one job, the input into one Python task, no join) counts
    the rows it read, checked against the graph's edges and the chain's non-zeros, and
    the summary line sets the best peer against it."""
    argv = ("--query", "triangle", "--chain", "--chain-n", "300", "--semirings", "real")
    status, by = run_beyond_driver(tmp_path, *argv, "--contenders", "engine,sql,floor", str(KARATE))
    assert status == 0
    floor = beyond_floor_label()
    chain = next(k for k in by if k[0].startswith("chain") and k[2] == floor)
    for r in (by[("karate", "triangle", floor)], by[chain]):
        assert r["correct"] == "True" and r["spark_jobs"] == "1", r
    assert capsys.readouterr().out.count("best peer ÷ floor") == 2


def beyond_floor_label() -> str:
    from benchmarks import beyond_driver

    return beyond_driver.LABELS["floor"]


def test_kernels_quick_run_compares_every_runner(tmp_path, capsys):
    """``benchmarks/kernels.py --quick``: every workload, every contender, the same answers,
    the ratios and the runners' speed-ups written; a differing answer is flagged."""
    from benchmarks import kernels

    assert kernels.main(["--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "over the Generic Join" in out and "ANSWER DIFFERS" not in out
    with (tmp_path / "kernels.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    by = {(r["workload"].split(" ")[0], r["contender"]) for r in rows if r["status"] == "ok"}
    for runner in ("driver/blas", "driver/graphblas-mxm", "driver/graphblas-masked"):
        assert any(c == runner for _, c in by), runner
    assert len({w for w, _ in by}) == 4  # dense (chain, min-plus), sparse, min-plus, triangles
    assert all(r["status"] == "ok" and float(r["cpu_s"]) >= 0 for r in rows)
    tri = [r for r in rows if r["workload"].startswith("triangles")]
    assert len({r["count"] for r in tri}) == 1 and int(tri[0]["count"]) > 0
    assert all(r["speedup_over_generic_join"] for r in rows if r["contender"].startswith("driver/"))
    # the engine end to end, with and without its library runners, on every workload: its
    # answer compared with the library's (no ANSWER DIFFERS above), its phases and runners
    workloads = {r["workload"] for r in rows}
    for name in (kernels.ENGINE, kernels.ENGINE_GJ):
        engine = [r for r in rows if r["contender"] == name]
        assert {r["workload"] for r in engine} == workloads, name
        for r in engine:
            assert all(float(r[k]) >= 0 for k in kernels.PHASES), r
            assert r["runners"].startswith("driver/"), r
    assert all(
        set(r["runners"].split("; ")) == {"driver/generic-join"}
        for r in rows
        if r["contender"] == kernels.ENGINE_GJ
    )
    assert "driver/blas; driver/blas" in {r["runners"] for r in rows}  # the dense chain
    assert "engine ÷ library (target ≤ 1.5)" in out and "engine ÷ library, its answer read" in out
    # GraphBLAS's product alone owes its rows' sort; the row with its answer read owes none
    libs = {r["contender"]: r for r in rows if r["library"] == "True"}
    assert libs["GraphBLAS mxm(min_plus)"]["deferred"] == "the sort of each row"
    assert libs["GraphBLAS mxm(min_plus), answer read"]["deferred"] == ""
    args = kernels.parse_args(["--quick"])
    cs = [kernels.Contender("a", lambda: 1, True), kernels.Contender("b", lambda: 2)]
    flagged = kernels.bench("w", cs, lambda x, y: x == y, args, [])
    assert "ANSWER DIFFERS" in flagged[1].note and flagged[1].ratio is not None
    with pytest.raises(SystemExit):
        kernels.parse_args(["--workloads", "cliques"])
    # --kinds picks the contenders; --profile prints one more engine run's costliest calls
    argv = ["--quick", "--workloads", "min-plus", "--kinds", "engine", "--profile", "5"]
    assert kernels.main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cProfile of one engine run, min-plus" in out and "query.py" in out
    with (tmp_path / "kernels.csv").open(encoding="utf-8") as fh:
        assert [r["contender"] for r in csv.DictReader(fh)] == [kernels.ENGINE]


# -- 4-cliques in the driver: the engine against DuckDB -----------------------------------------
def cliques_rows(tmp_path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with (tmp_path / "cliques.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[: len(_common.COLUMNS)] == list(_common.COLUMNS)
    return {(r["workload"], r["contender"]): r for r in rows}


def test_cliques_quick_run_counts_with_every_contender(tmp_path, capsys):
    """``benchmarks/cliques.py --quick`` on karate (11 4-cliques) and a generated
    power-law graph: every contender's count agrees with the numpy reference, and the
    table sets DuckDB against the engine."""
    from benchmarks import cliques

    argv = ["--quick", "--power-edges", "2000", "--out", str(tmp_path), str(KARATE)]
    assert cliques.main(argv) == 0
    out = capsys.readouterr().out
    assert "DuckDB ÷ engine (target ≥ 2)" in out and "All counts agree" in out
    by = cliques_rows(tmp_path)
    graphs = {w for w, _ in by}
    assert graphs == {"karate", "power-law m=2,000"}
    assert {c for _, c in by} == set(cliques.LABELS.values())
    has_duckdb = importlib.util.find_spec("duckdb") is not None
    for (_, contender), r in by.items():
        if contender == "DuckDB" and not has_duckdb:
            assert r["status"] == "skipped" and "not installed" in r["note"]
            continue
        assert r["status"] == "ok" and r["count"] == r["expected"], r
    assert by[("karate", cliques.LABELS["engine"])]["count"] == "11"
    assert int(by[("karate", "DuckDB")]["edges"]) == 78
    power = by[("power-law m=2,000", cliques.LABELS["engine"])]
    assert float(power["read_s"]) > 0 and float(power["ratio"]) == 1.0
    assert float(power["cpu_s"]) > 0
    snap = tmp_path / "snap"
    snap.mkdir()
    for name in ("b.txt.gz", "a.txt", "c.csv"):
        (snap / name).write_bytes(b"")
    assert [Path(x).name for x in cliques.snap_paths(str(snap))] == ["a.txt", "b.txt.gz"]


def test_cliques_flags_a_wrong_count_and_skips_after_a_timeout(tmp_path, monkeypatch, capsys):
    """A count that differs from the reference makes the exit status 1; a contender that
    timed out on a graph is not run on the larger ones."""
    from benchmarks import cliques

    monkeypatch.setattr(cliques, "clique_count_numpy", lambda edges, k: 12)
    argv = ["--quick", "--power-edges", "--contenders", "engine", "--out", str(tmp_path)]
    assert cliques.main([*argv, "--profile", "5", str(KARATE)]) == 1
    out = capsys.readouterr().out
    assert "COUNT MISMATCH" in out and "cProfile of one engine run, karate" in out
    monkeypatch.undo()
    small = tmp_path / "small.txt"
    small.write_text("1 2\n2 3\n1 3\n1 4\n2 4\n3 4\n")  # one 4-clique, 6 edges
    fn = cliques.Bench.fn

    def slow_on_small(self, name, g):  # an engine run past the timeout, on the small graph
        run = fn(self, name, g)
        return (lambda: time.sleep(0.5) or run()) if g.name == "small" else run

    monkeypatch.setattr(cliques.Bench, "fn", slow_on_small)
    argv = ["--quick", "--power-edges", "--timeout", "0.1", "--out", str(tmp_path)]
    assert cliques.main([*argv, "--contenders", "engine", str(small), str(KARATE)]) == 0
    by = cliques_rows(tmp_path)
    label = cliques.LABELS["engine"]
    assert by[("small", label)]["status"] == "timeout"
    assert by[("karate", label)]["status"] == "skipped"
    assert "timed out on a smaller graph" in by[("karate", label)]["note"]


def test_past_driver_profile_measures_every_part(spark, tmp_path, capsys):
    """``benchmarks/past_driver_profile.py``: each part of a triangle count past the driver
    measured alone, the counts of the engine, the cells' kernel and Spark SQL agreeing."""
    from benchmarks import past_driver_profile

    argv = ["--repeat", "1", "--out", str(tmp_path), str(KARATE)]
    assert past_driver_profile.main(argv) == 0
    out = capsys.readouterr().out
    assert "| pack + shuffle + unpack |" in out and "share of the engine's" in out
    with (tmp_path / "past_driver_profile.csv").open(encoding="utf-8") as fh:
        rows = {(r["workload"], r["contender"]): r for r in csv.DictReader(fh)}
    parts = {c for _, c in rows}
    assert {"engine", "engine: step", "pack + shuffle", "floor", "spark sql"} <= parts
    assert "cells' kernel (one thread)" in parts
    karate = {c: r for (w, c), r in rows.items() if w == "karate"}
    assert karate["engine"]["count"] == karate["spark sql"]["count"] == "45"
    assert karate["cells' kernel (one thread)"]["count"] == "45"
    assert karate["cells' kernel, graphblas-masked"]["count"] == "45"  # the runner not given
    assert "routed rows" in karate["pack + shuffle + unpack"]["note"]
    assert all(r["status"] == "ok" and float(r["median_s"]) > 0 for r in rows.values())


# -- recursion past the driver ---------------------------------------------------------------
def test_recursion_past_driver_contenders_agree(spark, tmp_path, capsys):
    """``benchmarks/recursion_past_driver.py`` on a small directed edge list (cycles, nodes
    the source does not reach): every contender finds the same nodes and distances (``main``
    raises otherwise), the Pregel supersteps equal the loop's rounds, and the engine's
    rounds are reported."""
    from benchmarks import recursion_past_driver as rpd

    pairs = np.random.default_rng(5).integers(0, 15, (30, 2))
    path = tmp_path / "g.txt"
    path.write_text("\n".join(f"{u} {v}" for u, v in pairs) + "\n")
    argv = ["--edges", "0", "--no-warmup", "--timeout", "120", "--out", str(tmp_path)]
    assert rpd.main([*argv, str(path), "--contenders", *rpd.CONTENDERS]) == 0
    out = capsys.readouterr().out
    assert "best peer ÷ engine" in out and "filtered Spark scans" in out
    with (tmp_path / "recursion_past_driver.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["query"], r["contender"]) for r in rows] == [
        (q, rpd.LABELS[c]) for q in ("sssp", "reach") for c in rpd.CONTENDERS
    ]
    assert all(r["status"] == "ok" for r in rows)
    for q in ("sssp", "reach"):
        by = {r["contender"]: r for r in rows if r["query"] == q}
        assert 1 < int(by[rpd.BASELINE]["count"]) < 15  # some nodes are not reached
        assert len({r["count"] for r in by.values()}) == 1
        loop, pregel = (int(by[rpd.LABELS[c]]["rounds"]) for c in ("pyspark", "graphframes"))
        assert loop == pregel


def test_graphframes_pregel_matches_scipy(spark):
    """The Pregel rewrite's distances and reached nodes against scipy on a weighted graph."""
    csgraph = pytest.importorskip("scipy.sparse.csgraph")
    from scipy import sparse

    from benchmarks import recursion
    from benchmarks import recursion_past_driver as rpd

    g = recursion.weighted_graph("g", power_law_graph(60, 150, seed=2), 4, both=False)
    E = recursion.edges_frame(spark, g)
    n = int(max(g.src.max(), g.dst.max())) + 1
    d = csgraph.dijkstra(
        sparse.csr_matrix((g.weight, (g.src, g.dst)), shape=(n, n)), indices=g.source
    )
    reached = np.flatnonzero(np.isfinite(d))
    got = rpd.graphframes_sssp(E, g.source)
    assert got.nodes.tolist() == reached.tolist() and np.array_equal(got.dist, d[reached])
    assert rpd.graphframes_reach(E, g.source, checkpoint_every=1).nodes.tolist() == reached.tolist()


def test_recursion_view_only_needs_no_spark(tmp_path, capsys):
    """``recursion.py --view-only``: the view's ticks against recomputes (compared after every
    tick), µs per change in the table, and no Spark session started."""
    from pyspark.sql import SparkSession

    from benchmarks import recursion

    active = SparkSession.getActiveSession()
    argv = ["--view-only", "--workload", "sssp", "--edges", "2000", "--ticks", "2"]
    argv += ["--tick-edges", "10", "--tick-deletions", "3", "--out", str(tmp_path)]
    assert recursion.main(argv) == 0
    assert SparkSession.getActiveSession() is active
    assert "µs per change" in capsys.readouterr().out
    with (tmp_path / "recursion.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["contender"] for r in rows] == ["view tick", "recompute"]
    assert [int(r["runs"]) for r in rows] == [2, 2]
    with pytest.raises(SystemExit):
        recursion.parse_args(["--view-only", "--no-view"])
