"""`python -m factnode.cli._schemas [DIR]`: writes the `--json` schemas (default docs/cli-json)."""

from __future__ import annotations

import sys
from pathlib import Path

from ._json import write_schemas

if __name__ == "__main__":
    for path in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/cli-json")):
        print(path)
