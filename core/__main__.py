"""``python -m malaunch`` runs the command line."""

from malaunch.cli import main

main()
