"""The seeded simulator of whole clusters (`tritonmq sim`); a package, so wheels carry it."""
