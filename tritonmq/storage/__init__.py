"""Segment files behind the in-memory log: the file I/O; what is durable is decided in core/."""
