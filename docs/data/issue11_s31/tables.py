#!/usr/bin/env python3
"""The tables of docs/benchmarks.md "Issue 11, session 31" from one device call's folder (call1/):

    python3 docs/data/issue11_s31/tables.py docs/data/issue11_s31/call1

Session 32's tables.py (the builds as arguments) with this call's builds: main31 beside the peers and as the base
of the A/B table, fst and rsc against it (two rounds each), main31's roofline at T = 32768.
"""
import os, sys

here = os.path.dirname(os.path.abspath(__file__))
os.execv(sys.executable, [sys.executable, os.path.join(here, '..', 'issue11_s32', 'tables.py'), sys.argv[1], 'main31', 'main31', 'fst', 'rsc'])
