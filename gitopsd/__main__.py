"""`python -m gitopsd` runs the command-line interface."""

from gitopsd.cli import main

raise SystemExit(main())
