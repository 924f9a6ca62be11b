"""`python -m factnode.cli`: the same as the `factnode` command."""

from factnode.cli import main

raise SystemExit(main())
