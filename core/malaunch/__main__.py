"""``python -m malaunch`` runs the command line."""

from malaunch.cli.main import main

main()
