#!/usr/bin/env bash
# System packages blocklab uses beyond Python: fio (device limits), MariaDB
# (the InnoDB engine), rocksdb-tools (db_bench, ldb, sst_dump: the RocksDB
# engine), Chromium (the report's browser test) and Debian's PostgreSQL 15
# (the tests' "someone else's server": a cluster of its own), linux-perf (CPU
# stack profiles, --cpu-profile) and bpftrace (uprobes, --trace-function).
# As root it installs what is missing with apt-get; otherwise it prints the
# exact command to run, and exits 0 so `make` can go on with what is there.
set -euo pipefail

wanted=(fio mariadb-server mariadb-client rocksdb-tools chromium postgresql-15 linux-perf bpftrace)
missing=()
for pkg in "${wanted[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "system packages: all present (${wanted[*]})"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "system packages missing: ${missing[*]} (no apt-get here: install them with your package manager)"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    echo "system packages: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    echo "system packages: installed ${missing[*]}"
else
    echo "system packages missing: ${missing[*]}"
    echo "install them with:  sudo apt-get install -y ${missing[*]}"
fi
