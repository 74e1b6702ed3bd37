from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # test modules import synthetic

# syn_csv and trained (a model folder from `pydvfs train`) live in tests/conftest.py: the
# release binary's tests (tests/govcore/) compile the same trained tree in.
