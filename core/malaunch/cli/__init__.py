"""The command line: the only layer that takes its configuration from ``os.environ`` and
``sys.argv``, sets up logging sinks and exits (the supervisor still hands its own environment on
to the processes it starts, as every launcher does). ``main`` is the console script,
``launch`` the launch command, ``tools`` and ``simulate`` the other commands."""
