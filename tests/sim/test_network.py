"""The network model: refused vs timed out, partitions, per-connection order."""

from __future__ import annotations

import random

from tritonmq.sim.network import ZK, Dial, Network, Proc


def make() -> Network:
    net = Network(random.Random(7))
    net.procs.update({"a": Proc.RUNNING, "b": Proc.RUNNING})
    return net


def test_a_crashed_process_refuses_and_a_frozen_one_times_out() -> None:
    net = make()
    assert net.dial("a", "b") is Dial.CONNECTED
    net.procs["b"] = Proc.DOWN
    assert net.dial("a", "b") is Dial.REFUSED
    net.procs["b"] = Proc.FROZEN
    assert net.dial("a", "b") is Dial.TIMED_OUT
    assert net.dial("a", "nobody") is Dial.REFUSED


def test_a_partition_times_out_even_when_the_process_is_gone() -> None:
    net = make()
    net.cuts.add(frozenset(("a", "b")))
    assert net.dial("a", "b") is Dial.TIMED_OUT
    net.procs["b"] = Proc.DOWN
    assert net.dial("a", "b") is Dial.TIMED_OUT  # no RST crosses a partition
    assert net.link_ok("a", ZK)


def test_an_isolated_node_reaches_nobody_not_even_zookeeper() -> None:
    net = make()
    net.isolated.add("a")
    assert not net.link_ok("a", ZK) and not net.link_ok("b", "a")
    assert net.link_ok("b", ZK)


def test_messages_on_one_connection_never_overtake_each_other() -> None:
    net = make()
    conn = net.open("a", "b", "repl")
    times = [net.arrival(conn, now=i * 0.0001) for i in range(200)]
    assert times == sorted(times)
    assert all(t >= i * 0.0001 for i, t in enumerate(times))


def test_closing_a_connection_loses_what_it_held() -> None:
    net = make()
    conn = net.open("a", "b", "client")
    conn.held.append(("b", "late"))
    net.close(conn)
    assert not conn.open and conn.held == [] and net.conns_of("a") == []


def test_a_live_process_can_refuse_everyone_or_one_peer() -> None:
    net = make()
    net.procs["c"] = Proc.RUNNING
    net.refusing.add(("b", "a"))  # a firewall rule: b rejects a only
    assert net.dial("a", "b") is Dial.REFUSED
    assert net.dial("c", "b") is Dial.CONNECTED
    net.refusing = {("b", "")}  # b's listener is down, the process lives
    assert net.dial("c", "b") is Dial.REFUSED
    assert net.running("b")
