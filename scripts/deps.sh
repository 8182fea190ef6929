#!/usr/bin/env bash
# Installs what viprof needs to build, run and test, from Debian's packages only.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang llvm libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev
      linux-perf openjdk-17-jdk-headless
      golang-go golang-github-google-pprof-dev chromium procps bc libclang-rt-14-dev python3
      prometheus protobuf-compiler uidmap libcurl4-openssl-dev openssl iproute2
      clickhouse-server clickhouse-client strace)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
