#!/usr/bin/env bash
# .ci/run's counter on hand-written test logs (tools/count_test_results_test.py).
exec /usr/bin/python3 tools/count_test_results_test.py
