"""The command line: the only layer that reads ``os.environ``/``sys.argv``, sets up logging
sinks and exits. ``main`` is the console script; ``launch`` the launch command; ``tools`` and
``simulate`` the other commands."""
