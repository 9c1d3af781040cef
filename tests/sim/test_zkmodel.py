"""The ZooKeeper model: CAS on versions, ephemerals tied to sessions, expiry, watches."""

from __future__ import annotations

from tritonmq.sim.zkmodel import Outcome, ZkCreate, ZkDelete, ZkGet, ZkList, ZkModel, ZkSet


def test_cas_on_version_lets_one_writer_win() -> None:
    zk = ZkModel(session_timeout=2.0)
    a, b = zk.open_session("a", 0.0), zk.open_session("b", 0.0)
    created, _ = zk.apply(a, ZkCreate("/s", "v0"))
    assert created.outcome is Outcome.OK and created.value.version == 0
    first, _ = zk.apply(a, ZkSet("/s", "by a", 0))
    second, _ = zk.apply(b, ZkSet("/s", "by b", 0))
    assert first.outcome is Outcome.OK and first.value.version == 1
    assert second.outcome is Outcome.CONFLICT
    got, _ = zk.apply(b, ZkGet("/s"))
    assert got.value.data == "by a"


def test_create_of_an_existing_node_conflicts_and_shows_it() -> None:
    zk = ZkModel(session_timeout=2.0)
    s = zk.open_session("a", 0.0)
    zk.apply(s, ZkCreate("/n", 1))
    again, _ = zk.apply(s, ZkCreate("/n", 2))
    assert again.outcome is Outcome.CONFLICT and again.value.data == 1
    gone, _ = zk.apply(s, ZkDelete("/missing"))
    assert gone.outcome is Outcome.CONFLICT


def test_ephemeral_goes_when_its_session_expires_without_heartbeats() -> None:
    zk = ZkModel(session_timeout=2.0)
    owner, watcher = zk.open_session("a", 0.0), zk.open_session("b", 0.0)
    zk.apply(owner, ZkCreate("/g/members/a", "me", ephemeral=True))
    zk.watch(watcher, "/g/")
    zk.heartbeat(watcher, 1.9)
    assert zk.expire_due(1.9) == []
    fired = zk.expire_due(2.0)  # owner silent since 0.0
    assert fired == [(watcher, "/g/")]
    listed, _ = zk.apply(watcher, ZkList("/g/"))
    assert listed.value == {}
    assert not zk.heartbeat(owner, 2.1)  # too late: the session is gone for good
    late, _ = zk.apply(owner, ZkCreate("/x", 1))
    assert late.outcome is Outcome.EXPIRED


def test_heartbeats_keep_a_session_and_its_ephemerals() -> None:
    zk = ZkModel(session_timeout=2.0)
    s = zk.open_session("a", 0.0)
    zk.apply(s, ZkCreate("/e", 1, ephemeral=True))
    for t in (0.6, 1.2, 1.8, 2.4, 3.0):
        assert zk.heartbeat(s, t)
        zk.expire_due(t)
    assert "/e" in zk.nodes


def test_watches_fire_for_changes_under_their_prefix_only() -> None:
    zk = ZkModel(session_timeout=2.0)
    s, w = zk.open_session("a", 0.0), zk.open_session("w", 0.0)
    zk.watch(w, "/groups/g0/")
    _, fired = zk.apply(s, ZkCreate("/groups/g0/state", 1))
    assert fired == [(w, "/groups/g0/")]
    _, fired = zk.apply(s, ZkCreate("/groups/g1/state", 1))
    assert fired == []
    _, fired = zk.apply(s, ZkSet("/groups/g0/state", 2, 5))  # a failed CAS changes nothing
    assert fired == []


def test_a_clean_close_removes_ephemerals_at_once() -> None:
    zk = ZkModel(session_timeout=2.0)
    s = zk.open_session("a", 0.0)
    zk.apply(s, ZkCreate("/e", 1, ephemeral=True))
    zk.apply(s, ZkCreate("/p", 1))
    zk.close_session(s)
    assert "/e" not in zk.nodes and "/p" in zk.nodes


def test_a_multi_writes_all_or_nothing_and_a_multi_prefix_list_reads_several_subtrees() -> None:
    from tritonmq.sim.zkmodel import ZkListMany, ZkMulti

    zk = ZkModel(session_timeout=2.0)
    s, w = zk.open_session("a", 0.0), zk.open_session("w", 0.0)
    zk.apply(s, ZkCreate("/cluster", 0))
    zk.apply(s, ZkCreate("/slots/0", "a"))
    zk.apply(s, ZkCreate("/other", "x"))
    zk.watch(w, "/cluster")
    stale, fired = zk.apply(s, ZkMulti((ZkSet("/slots/0", "b", 0), ZkSet("/cluster", 1, 7))))
    assert stale.outcome is Outcome.CONFLICT and fired == []
    assert zk.nodes["/slots/0"].data == "a", "a failed multi writes nothing"
    ok, fired = zk.apply(s, ZkMulti((ZkSet("/slots/0", "b", 0), ZkSet("/cluster", 1, 0))))
    assert ok.outcome is Outcome.OK and [n.version for n in ok.value] == [1, 1]
    assert fired == [(w, "/cluster")]
    got, _ = zk.apply(s, ZkListMany(("/cluster", "/slots/")))
    assert sorted(got.value) == ["/cluster", "/slots/0"]


def test_a_fenced_write_happens_only_while_its_fence_is_at_its_version() -> None:
    """A primary's subscription writes are fenced by its group state's version, as a
    real ZooKeeper transaction with a check: once a successor moved the state on, the
    deposed primary writes nothing (replication.md S1)."""
    zk = ZkModel(session_timeout=2.0)
    s = zk.open_session("a", 0.0)
    zk.apply(s, ZkCreate("/state", "epoch 1"))
    made, _ = zk.apply(s, ZkCreate("/offsets/t/q", 5, fence=("/state", 0)))
    assert made.outcome is Outcome.OK
    zk.apply(s, ZkSet("/state", "epoch 2"))
    late, _ = zk.apply(s, ZkCreate("/offsets/t/late", 13, fence=("/state", 0)))
    stale, _ = zk.apply(s, ZkSet("/offsets/t/q", 9, fence=("/state", 0)))
    assert late.outcome is stale.outcome is Outcome.CONFLICT
    assert late.value is None, "not a create that found the znode: it held no offset"
    got, _ = zk.apply(s, ZkList("/offsets/"))
    assert {p: n.data for p, n in got.value.items()} == {"/offsets/t/q": 5}
    now, _ = zk.apply(s, ZkSet("/offsets/t/q", 9, fence=("/state", 1)))
    assert now.outcome is Outcome.OK


def test_an_era_ordered_offset_write_leaves_a_later_era_in_place() -> None:
    """As the real store (coord.offsets): a hand-on written again after the subscription
    went on past its era is left out and answered as done (simulator scenario `tests/sim/test_scenarios.py::test_a_hand_on_written_again_never_sends_an_offset_back_an_era`)."""
    zk = ZkModel(session_timeout=2.0)
    s = zk.open_session("a", 0.0)
    zk.apply(s, ZkCreate("/offsets/t/d", ("broadcast", 0, 0)))
    zk.apply(s, ZkSet("/offsets/t/d", ("broadcast", 0, 2), era_ordered=True))
    late, _ = zk.apply(s, ZkSet("/offsets/t/d", ("broadcast", 0, 1), era_ordered=True))
    assert late.outcome is Outcome.OK
    on, _ = zk.apply(s, ZkSet("/offsets/t/d", ("broadcast", 7, 2), era_ordered=True))
    got, _ = zk.apply(s, ZkGet("/offsets/t/d"))
    assert on.outcome is Outcome.OK and got.value.data == ("broadcast", 7, 2)
