#!/usr/bin/env bash
# The package rules of docs/architecture.md, checked on the source tree (tools/package_rules_test.py).
exec /usr/bin/python3 tools/package_rules_test.py
