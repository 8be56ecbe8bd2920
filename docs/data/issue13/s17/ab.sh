#!/usr/bin/env bash
# ab.sh ARGS... : one prefill_ab run with date, uptime and cicc count before and after
echo "# $(date -u +%T) $(uptime) cicc=$(pgrep -c cicc)"; echo "\$ OMP_WAIT_POLICY=passive ./prefill_ab $*"
OMP_WAIT_POLICY=passive ./prefill_ab "$@" 2>&1
echo "# $(date -u +%T) $(uptime) cicc=$(pgrep -c cicc)"; echo
