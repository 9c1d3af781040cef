"""Development tooling: local clusters of real processes, ZooKeeper runners, a TCP proxy,
the benchmark, the demo and the chaos run. Nothing here runs inside a broker."""
