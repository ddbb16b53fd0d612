"""The applications built on camus: each a package with a runnable demo (see apps/cli.py)."""
