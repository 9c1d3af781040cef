"""The hostile-client suite runs on the integration suite's real clusters (real ZooKeeper,
real broker processes): its ``make_cluster`` fixture, as the browser suite takes it. The
session's ZooKeeper and credential come from tests/conftest.py."""

from __future__ import annotations

from tests.integration.conftest import make_cluster  # noqa: F401  (fixture)
