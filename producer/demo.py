"""The README's main job: validate and plan the bundled example repo.

Run with ``python -m producer.demo``; later the same entry point runs the whole offline
evaluation (issue 6).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "demo-repo"


def main() -> int:
    cli = [sys.executable, "-m", "producer.cli"]
    for args in (
        ["validate", "--all-evals", "--repo", str(EXAMPLE)],
        ["run", "--all-evals", "--dry-run", "--repo", str(EXAMPLE), "--model", "scripted/offline"],
    ):
        print("$ skill-eval " + " ".join(args), flush=True)
        code = subprocess.call([*cli, *args])
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
