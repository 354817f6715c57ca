"""One reach: the hops a change takes are planned from the rule alone, the bounds have
one home, and the delta rule's placement is the planner's (faq/plan/reach.py,
faq/plan/physical.py).  No Spark needed."""

from __future__ import annotations

import faq
from faq import Factor, query, solve_delta
from faq.plan import bounds, hops
from faq.plan.physical import delta_in_driver, delta_in_one_task
from faq.rule import parse_rule


def test_a_path_is_read_in_two_hops_from_its_end_and_one_from_its_middle():
    rule = parse_rule("T(a, d) :- E(a, b), F(b, c), E(c, d)")
    end = hops(rule, 0)
    assert end.complete
    assert [[h.atom for h in r] for r in end.rounds] == [[1], [2]]
    assert end.rounds[0][0].cols == ((0, "b"),) and end.rounds[1][0].cols == ((0, "c"),)
    assert end.first(1) == ((0, "b"),) and end.first(2) == ()
    middle = hops(rule, 1)
    assert [[h.atom for h in r] for r in middle.rounds] == [[0, 2]]
    assert not end.one_hop and middle.one_hop


def test_a_triangle_is_one_hop_through_every_shared_column():
    rule = parse_rule("T() :- E(a, b), E(b, c), E(a, c)")
    r = hops(rule, 0)
    assert r.complete and len(r.rounds) == 1
    assert {h.atom: h.cols for h in r.rounds[0]} == {1: ((0, "b"),), 2: ((0, "a"),)}
    assert all(hops(rule, i).one_hop for i in range(3))


def test_a_product_is_not_reached():
    rule = parse_rule("T() :- E(a, b), F(c, d)")
    r = hops(rule, 0)
    assert not r.complete and r.rounds == ()
    assert not r.one_hop


def test_a_rule_of_one_atom_has_no_hop_and_reads_nothing_else():
    r = hops(parse_rule("Q(a) :- E(a, b)"), 0)
    assert r.complete and r.rounds == () and r.one_hop and r.first(0) == ()


def test_the_bounds_come_from_the_settings_in_force():
    with faq.settings(max_literals=3, max_fetch_rows=7):
        b = bounds()
    assert (b.max_literals, b.max_fetch_rows) == (3, 7)
    assert b.literals_over(3, "values") == ""
    assert b.literals_over(4, "values") == "4 values > max_literals=3"
    assert b.rows_over("a tick reaches") == "a tick reaches over max_fetch_rows=7 rows"


def test_the_delta_rules_placement_names_its_settings():
    with faq.settings(local_delta_rows=10, cell_rows=100, max_literals=5):
        assert delta_in_driver(10, True) == (True, "changes hold ≤ 10 rows ≤ local_delta_rows=10")
        assert delta_in_driver(11, True) == (
            False,
            "a change holds 11 rows > local_delta_rows=10",
        )
        assert delta_in_driver(1, False) == (False, "local=False")
    with faq.settings(local_delta_rows=10, local_rows=20):  # all in the driver: local_rows
        assert delta_in_driver(11, True, held=True) == (
            True,
            "a change holds 11 rows > local_delta_rows=10, but every relation and change is "
            "in the driver (≤ local_rows=20)",
        )
        assert not delta_in_driver(21, True, held=True)[0]
        assert not delta_in_driver(11, False, held=True)[0]
    with faq.settings(local_delta_rows=10, cell_rows=100, max_literals=5):
        assert delta_in_one_task(5, 100.0) == (
            "one Spark task: the changes reach ~100 rows ≤ cell_rows=100"
        )
        assert delta_in_one_task(6, 1.0) == ""  # past max_literals
        assert delta_in_one_task(1, 101.0) == ""  # past cell_rows


def test_a_delta_results_explain_says_where_and_why():
    q = query("Q(a, c) :- R(a, b), S(b, c)", semiring="counting")
    R = Factor.from_dict({(1, 2): 1, (2, 3): 1}, ("a", "b"), "counting", name="R")
    S = Factor.from_dict({(2, 5): 2}, ("b", "c"), "counting", name="S")
    dR = Factor.from_dict({(4, 2): 1}, ("a", "b"), "counting", name="R")
    res = solve_delta(q, {"R": R, "S": S}, {"R": dR})
    assert res.change.to_dict() == {(4, 5): 2}
    text = res.explain()
    assert text.splitlines()[0] == f"Δ: driver ({res.why})"
    assert "local_delta_rows=" in res.why
    assert "term of atom 0: driver" in text
