"""``malaunch simulate``'s engine: what each platform injects into each node (``platforms``),
the node launchers run as one job (``run``), and the platform's rank-table writer
(``ranktable_writer``). The command itself is in :mod:`malaunch.cli.simulate`."""
