"""The limits and defaults of a work submission: one copy for every part that checks them.

``WorkSubmission`` (``shared/models.py``) declares them, Warp's ``warp_work_broadcast``
publishes them in its input schema, and Shuttle checks them before it sends anything
(``shuttle/validate.py`` and the options of ``shuttle submit``);
``tests/shared/work/test_submission_parity.py`` holds all three to the model. Plain
numbers and no imports, so Shuttle reads them without loading pydantic.
"""

from __future__ import annotations

from typing import Final

TASK_ID_MAX_LENGTH: Final = 200
DESCRIPTION_MAX_LENGTH: Final = 32_000
PRIORITY_MIN: Final = 1
PRIORITY_MAX: Final = 10
"""10 is taken first; the priority is also a token of the queue subject (``p01``..``p10``)."""
DEFAULT_PRIORITY: Final = 5
MAX_ATTEMPTS_LIMIT: Final = 100
"""The most attempts one item may be given (``max_attempts`` is 1 to this)."""
DEFAULT_MAX_ATTEMPTS: Final = 3
MAX_DEPENDENCIES: Final = 100
"""How many items one submission may depend on."""
MAX_REVIEW_ROUNDS: Final = 10
MAX_FOLLOW_UPS: Final = 10
"""Follow-up items one conditional pass in review may create."""
