"""Option parsing of the Spark source and sink: Kafka's names, clear errors. No Spark needed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tritonmq.errors import ConfigError
from tritonmq.spark.options import sink_options, source_options


def test_source_defaults_and_kafka_names() -> None:
    o = source_options({"zk": "127.0.0.1:2181/tm", "topics": "a, b"})
    assert o.url == "zk://127.0.0.1:2181/tm" and o.topics == ("a", "b")
    assert o.starting == "latest" and o.fail_on_data_loss and not o.include_headers
    assert source_options({"url": "ws://h:1", "subscribe": "a"}, batch=True).starting == "earliest"
    o = source_options(
        {
            "zk": "h:1",
            "topicPattern": "orders\\..*",
            "startingPosition": '{"g1": 5}',
            "maxRecordsPerTrigger": "1000",
            "failOnDataLoss": "false",
            "includeHeaders": "true",
            "subscription": "pipeline-1",
        }
    )
    assert o.matches("orders.eu") and not o.matches("xorders.eu")
    assert o.starting == {"g1": 5} and o.max_records == 1000
    assert not o.fail_on_data_loss and o.include_headers and o.subscription == "pipeline-1"


@pytest.mark.parametrize(
    ("opts", "says"),
    [
        ({"zk": "h:1", "url": "ws://h:2", "topics": "a"}, "not both"),
        ({"url": "http://h:1", "topics": "a"}, "zk://"),
        ({"zk": "h:1"}, "exactly one of"),
        ({"zk": "h:1", "topics": "a", "topicPattern": "a"}, "exactly one of"),
        ({"zk": "h:1", "topics": " , "}, "names no topic"),
        ({"zk": "h:1", "topicPattern": "("}, "regular expression"),
        ({"zk": "h:1", "topics": "a", "startingPosition": "first"}, "JSON of group -> ts"),
        ({"zk": "h:1", "topics": "a", "startingPosition": '{"g1": -1}'}, "JSON of group"),
        ({"zk": "h:1", "topics": "a", "startingTimestamp": "yesterday"}, "milliseconds"),
        ({"zk": "h:1", "topics": "a", "maxRecordsPerTrigger": "0"}, "positive integer"),
        ({"zk": "h:1", "topics": "a", "failOnDataLoss": "maybe"}, "true or false"),
        ({"zk": "h:1", "topics": "a", "subscription": ""}, "1..249"),
        ({"zk": "h:1", "topics": "a", "caFile": " "}, "caFile"),
        ({"zk": "h:1", "topics": "a", "tokenFile": ""}, "tokenFile"),
    ],
)
def test_bad_source_options_say_what_is_wrong(opts: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", "\\(")):
        source_options(opts)


def test_ca_file_for_wss_brokers() -> None:
    o = source_options({"url": "wss://h:1", "topics": "a", "caFile": "/etc/tm/ca.pem"})
    assert (o.url, o.ca_file) == ("wss://h:1", "/etc/tm/ca.pem")
    assert source_options({"zk": "h:1", "topics": "a"}).ca_file is None
    assert sink_options({"zk": "h:1", "caFile": "ca.pem"}).ca_file == "ca.pem"


def test_sink_options() -> None:
    o = sink_options({"zk": "h:1", "topic": "out", "sinkId": "s1"})
    assert (o.url, o.topic, o.sink_id) == ("zk://h:1", "out", "s1")
    assert sink_options({"url": "ws://h:1"}).topic is None
    with pytest.raises(ConfigError, match="sinkId"):
        sink_options({"zk": "h:1", "sinkId": ""})


def test_the_sink_names_the_durability_its_records_are_acknowledged_at() -> None:
    assert sink_options({"zk": "h:1", "durability": "synced"}).durability == "synced"
    assert sink_options({"zk": "h:1"}).durability == "", "the broker's default"
    with pytest.raises(ConfigError, match="durability"):
        sink_options({"zk": "h:1", "durability": "disk"})


def test_token_file_for_brokers_that_require_tokens() -> None:
    o = source_options({"zk": "h:1", "topics": "a", "tokenFile": "/etc/tm/spark.token"})
    assert o.token_file == "/etc/tm/spark.token"
    assert source_options({"zk": "h:1", "topics": "a"}).token_file is None
    assert sink_options({"zk": "h:1", "tokenFile": "t"}).token_file == "t"


@pytest.fixture
def no_cluster_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No cluster named by the environment; the local context (none yet) in tmp_path."""
    for k in ("TRITONMQ_URL", "TRITONMQ_ZK", "TRITONMQ_ZK_AUTH_FILE", "TRITONMQ_ZK_AUTH"):
        monkeypatch.delenv(k, raising=False)
    context = tmp_path / "context.json"
    monkeypatch.setenv("TRITONMQ_CONTEXT", str(context))
    return context


def write_context(context: Path, zk: str = "127.0.0.1:4350") -> Path:
    auth = context.with_name("zk.auth")
    auth.write_text("tritonmq:secret\n")
    state = {"zk": zk, "chroot": "/tritonmq", "zk_auth_file": str(auth), "brokers": []}
    context.write_text(json.dumps({**state, "pid": os.getpid()}))  # this process: running
    return auth


def test_zk_auth_file_names_the_zookeeper_credential(no_cluster_env: Path) -> None:
    """There was no option for it: the documented run failed with a long NoAuth trace."""
    o = source_options({"zk": "h:1", "topics": "a", "zkAuthFile": "/etc/tm/zk.auth"})
    assert o.zk_auth_file == "/etc/tm/zk.auth"
    assert sink_options({"zk": "h:1", "zkAuthFile": "z"}).zk_auth_file == "z"
    assert source_options({"zk": "h:1", "topics": "a"}).zk_auth_file is None
    with pytest.raises(ConfigError, match="zkAuthFile"):
        source_options({"zk": "h:1", "topics": "a", "zkAuthFile": " "})


def test_the_environments_credential_is_taken_when_no_option_names_one(
    no_cluster_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONMQ_ZK_AUTH_FILE", "/run/zk.auth")
    assert source_options({"zk": "h:1", "topics": "a"}).zk_auth_file == "/run/zk.auth"
    assert sink_options({"zk": "h:1"}).zk_auth_file == "/run/zk.auth"


def test_the_local_context_gives_the_cluster_and_its_credential(no_cluster_env: Path) -> None:
    """With neither 'zk' nor 'url', the cluster `tritonmq dev` runs, with its credential; and
    its credential when 'zk' names that cluster."""
    auth = write_context(no_cluster_env)
    o = source_options({"topics": "a"})
    assert (o.url, o.zk_auth_file) == ("zk://127.0.0.1:4350/tritonmq", str(auth))
    named = sink_options({"zk": "127.0.0.1:4350"})
    assert (named.url, named.zk_auth_file) == ("zk://127.0.0.1:4350", str(auth))
    other = source_options({"zk": "127.0.0.1:9999", "topics": "a"})
    assert other.zk_auth_file is None  # not the context's cluster: not its credential
    assert source_options({"topics": "a", "zkAuthFile": "mine"}).zk_auth_file == "mine"


def test_without_a_cluster_anywhere_the_error_says_where_to_name_one(
    no_cluster_env: Path,
) -> None:
    with pytest.raises(ConfigError, match="'zk'.*tritonmq dev"):
        source_options({"topics": "a"})
