"""Pure tests of the dataset pipeline (run with ``-p no:django``): make the checkout importable.

The editable install maps only the packages that existed when it was made, and without pytest-django
nothing puts the project root on ``sys.path``; ``datasets`` is looked up there.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
