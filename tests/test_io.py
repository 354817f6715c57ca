"""Edge-list reading: the quirks real SNAP files have (see shared data README)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from faq.io import load_edge_array, undirected_simple


def test_quirky_edge_list(tmp_path):
    p = tmp_path / "g.txt"
    # CRLF, comments, a bare node count, a header without '#', a self-loop, both
    # directions of one edge, extra columns, no final newline
    p.write_bytes(b"# comment\r\n42\r\nFromNodeId ToNodeId\r\n1 2\r\n2 1\r\n3\t3\r\n2 3 0.5\r\n1 3")
    with pytest.warns(UserWarning, match="skipped 2 line\\(s\\) .*besides 1 comment"):
        e = load_edge_array(p)
    assert e.tolist() == [[1, 2], [2, 1], [3, 3], [2, 3], [1, 3]]
    assert undirected_simple(e).tolist() == [[1, 2], [1, 3], [2, 3]]


def test_comments_alone_do_not_warn(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("# a\n% b\n0 1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_edge_array(p).shape == (1, 2)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_edge_array(tmp_path / "nope.txt")
    assert undirected_simple(np.empty((0, 2))).shape == (0, 2)
