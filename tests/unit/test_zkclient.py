"""Where the ZooKeeper credential comes from, and what every znode's ACL grants."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.security import Permissions

from tritonmq.coord.zkclient import (
    ENV_AUTH,
    ENV_AUTH_FILE,
    ClusterAcls,
    ZkCredential,
    credential_from,
    new_client,
)
from tritonmq.errors import ConfigError


def test_a_credential_is_user_colon_password_and_its_password_never_shows() -> None:
    cred = ZkCredential.parse("ops:s3cret:with:colons\n", "test")
    assert (cred.user, cred.password) == ("ops", "s3cret:with:colons")
    assert "s3cret" not in repr(cred)
    [acl] = cred.acl
    assert acl.perms == Permissions.ALL and acl.id.scheme == "digest"
    assert acl.id.id.startswith("ops:") and "s3cret" not in acl.id.id


@pytest.mark.parametrize("text", ["", "nocolon", ":pw", "user:", "  \n"])
def test_a_malformed_credential_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="user:password"):
        ZkCredential.parse(text, "test")


def test_the_setting_wins_over_the_file_variable_which_wins_over_the_inline_one(
    tmp_path: Path,
) -> None:
    setting, env_file = tmp_path / "a", tmp_path / "b"
    setting.write_text("a:1")
    env_file.write_text("b:2")
    env = {ENV_AUTH_FILE: str(env_file), ENV_AUTH: "c:3"}
    assert credential_from(str(setting), env) == ZkCredential("a", "1")
    assert credential_from("", env) == ZkCredential("b", "2")
    assert credential_from("", {ENV_AUTH: "c:3"}) == ZkCredential("c", "3")
    assert credential_from("", {}) is None


def test_a_missing_credential_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        credential_from(str(tmp_path / "absent"), {})


def test_clients_authenticate_and_create_znodes_only_the_credential_may_touch() -> None:
    cred = ZkCredential("ops", "pw")
    zk = new_client("127.0.0.1:1", auth=cred)
    assert ("digest", "ops:pw") in zk.auth_data and zk.default_acl == cred.acl
    assert not new_client("127.0.0.1:1", auth=None).auth_data


def test_the_reader_may_read_routing_znodes_only_and_write_nothing() -> None:
    acls = ClusterAcls(ZkCredential("ops", "pw"), ZkCredential("reader", "r"))
    reader_perms = {a.perms for a in acls.public if a.id.id.startswith("reader:")}
    assert reader_perms == {Permissions.READ}
    assert not [a for a in acls.private if a.id.id.startswith("reader:")]
    for path in ("/c", "/c/cluster", "/c/slots/3", "/c/groups/g1/state", "/c/groups/g1/members/b"):
        assert acls.for_path("/c", path) == acls.public, path
    for path in ("/c/subscriptions", "/c/subscriptions/t/s", "/c/offsets", "/c/offsets/t/s"):
        assert acls.for_path("/c", path) == acls.private, path
    assert acls.for_path("/c", "/c/offsetsx") == acls.public
    assert ClusterAcls(ZkCredential("ops", "pw")).public == ZkCredential("ops", "pw").acl
