"""A torch worker that records what its launcher gave it, for comparing launchers.

    torch_env_dump.py OUT_DIR

Writes OUT_DIR/env-<RANK>.json: ``{"environ": {...}, "is_torchelastic_launched": bool}``.
"""

from __future__ import annotations

import json
import os
import sys

import torch.distributed


def main() -> int:
    seen = {
        "environ": dict(os.environ),
        "is_torchelastic_launched": torch.distributed.is_torchelastic_launched(),
    }
    with open(os.path.join(sys.argv[1], f"env-{os.environ['RANK']}.json"), "w") as handle:
        json.dump(seen, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
