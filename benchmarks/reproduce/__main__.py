"""Every paper's reproduction: ``python -m benchmarks.reproduce`` (see its ``--help``).

Khalid et al. Tables 2 and 4 (:mod:`benchmarks.reproduce.khalid`) and the SPAM / SPDAM
tables (:mod:`benchmarks.reproduce.natole`) on ../shared/data: every row not cached yet, then
the tables rebuilt from every cached row (the text around them is docs/reproduction.md).

    python -m benchmarks.reproduce                               # every row not cached yet
    python -m benchmarks.reproduce --datasets ijcnn1,spambase --methods NBAUC,RankSVM
    python -m benchmarks.reproduce --report                      # only rebuild the tables
    python -m benchmarks.reproduce --list                        # the rows it knows
    python -m benchmarks.reproduce --diagnostics                 # the measurements the
                                                                 # explanations quote
"""

import sys

from benchmarks.reproduce._shared import PAPERS, main

if __name__ == "__main__":
    sys.exit(main(PAPERS, doc=__doc__, quick={"datasets": "spambase,diabetes",
                                              "methods": "RankSVM,LSAUC"}))
