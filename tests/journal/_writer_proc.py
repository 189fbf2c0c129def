"""A writer process for the concurrency tests.

    python -m tests.journal._writer_proc STORE NAME BATCHES BATCH_SIZE

Admits BATCHES batches of BATCH_SIZE tool calls (harness NAME, run = running
index) and prints ``committed <last_seq> <count>`` after each commit.
"""

from __future__ import annotations

import sys

from engine.journal.writer import Committer
from engine.store.db import connect


def main() -> None:
    store, name, batches, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    conn = connect(store)
    committer = Committer(conn, ticks=False)
    i = 0
    for _ in range(batches):
        rows = []
        for _ in range(size):
            rows.append((0, "run_event", "tool_call", "observer", name, None, f"r{i}", "bash",
                         *[None] * 7))  # fmt: skip
            i += 1
        good, _refused = committer.prepare(rows)
        result = committer.commit_checked(good)
        print(f"committed {result.last_seq} {i}", flush=True)


if __name__ == "__main__":
    main()
