#!/usr/bin/env bash
# Builds the images the docker backend's tests run, from the host's own Debian
# packages: nothing is pulled (the project's machines reach no registry).
#
#   capi-monolith/test-node:dev     a static busybox that sleeps forever; the
#                                   backend execs "sh -c" in it like in a kind node.
#   capi-monolith/test-haproxy:dev  Debian's haproxy with the shared libraries it
#                                   links, plus busybox, started like kindest/haproxy
#                                   with /usr/local/etc/haproxy/haproxy.cfg.
#
# Idempotent: an image that exists is kept (FORCE=1 rebuilds). The images are
# made with "docker import" from a root file system tarball, so neither
# BuildKit nor buildx is needed.
set -euo pipefail

NODE_IMAGE="${NODE_IMAGE:-capi-monolith/test-node:dev}"
HAPROXY_IMAGE="${HAPROXY_IMAGE:-capi-monolith/test-haproxy:dev}"
FORCE="${FORCE:-0}"

have_image() {
	[[ "${FORCE}" != "1" ]] && docker image inspect "$1" >/dev/null 2>&1
}

need_packages=()

if have_image "${NODE_IMAGE}" && have_image "${HAPROXY_IMAGE}"; then
	echo "docker test images present: ${NODE_IMAGE} ${HAPROXY_IMAGE}"
	exit 0
fi

docker version --format '{{.Server.Version}}' >/dev/null || {
	echo "the Docker Engine is not reachable (DOCKER_HOST=${DOCKER_HOST:-unset})" >&2
	exit 1
}

# A static busybox: Debian's busybox-static (the busybox package installs a
# dynamically linked one at the same path). ldd fails on static binaries.
find_static_busybox() {
	local candidate
	for candidate in /bin/busybox /usr/bin/busybox; do
		if [[ -x "${candidate}" ]] && ! ldd "${candidate}" >/dev/null 2>&1; then
			echo "${candidate}"
			return
		fi
	done
}
BUSYBOX="$(find_static_busybox)"
[[ -n "${BUSYBOX}" ]] || need_packages+=(busybox-static)
[[ -x /usr/sbin/haproxy ]] || need_packages+=(haproxy)

if ((${#need_packages[@]} > 0)); then
	echo "installing ${need_packages[*]}"
	SUDO=""
	[[ "$(id -u)" == "0" ]] || SUDO="sudo"
	${SUDO} apt-get update -qq
	DEBIAN_FRONTEND=noninteractive ${SUDO} apt-get install -y -qq --no-install-recommends "${need_packages[@]}" >/dev/null
	BUSYBOX="$(find_static_busybox)"
fi
[[ -n "${BUSYBOX}" ]] || { echo "no static busybox found after installing busybox-static" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# stage_busybox ROOT: busybox at /bin/busybox and one symlink per applet in
# /bin, plus the directories a Linux userland expects.
stage_busybox() {
	local root="$1"
	mkdir -p "${root}"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,root,var/lib,run/cluster-api,proc,sys,dev}
	chmod 1777 "${root}/tmp"
	install -m 0755 "${BUSYBOX}" "${root}/bin/busybox"
	local applet
	for applet in $("${BUSYBOX}" --list); do
		[[ "${applet}" == busybox ]] && continue
		ln -sf busybox "${root}/bin/${applet}"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"${root}/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"${root}/etc/group"
}

# import ROOT IMAGE CHANGE...: one image from a root file system.
import_image() {
	local root="$1" image="$2"
	shift 2
	local changes=()
	local change
	for change in "$@"; do
		changes+=(--change "${change}")
	done
	tar --numeric-owner -C "${root}" -c . | docker import "${changes[@]}" - "${image}" >/dev/null
	echo "built ${image}"
}

if ! have_image "${NODE_IMAGE}"; then
	root="${work}/node"
	stage_busybox "${root}"
	import_image "${root}" "${NODE_IMAGE}" \
		'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		'ENTRYPOINT ["/bin/busybox", "sleep", "2147483647"]'
fi

if ! have_image "${HAPROXY_IMAGE}"; then
	root="${work}/haproxy"
	stage_busybox "${root}"
	install -D -m 0755 /usr/sbin/haproxy "${root}/usr/sbin/haproxy"
	# Every shared library haproxy links, the dynamic loader included, at the
	# path ldd reports (symlinks copied as the files they point at).
	while read -r lib; do
		[[ -e "${lib}" ]] || continue
		mkdir -p "${root}$(dirname "${lib}")"
		cp -L "${lib}" "${root}${lib}"
	done < <(ldd /usr/sbin/haproxy | grep -o '/[^ ]*' | sort -u)
	mkdir -p "${root}/usr/local/etc/haproxy" "${root}/var/lib/haproxy" "${root}/run/haproxy"
	# The same minimal placeholder idea as kindest/haproxy: a valid config
	# that listens on the API server port until the backend writes its own.
	cat >"${root}/usr/local/etc/haproxy/haproxy.cfg" <<'CFG'
# placeholder; the docker backend writes the real configuration
defaults
  mode tcp
  timeout connect 5s
  timeout client 50s
  timeout server 50s

frontend control-plane
  bind *:6443
  default_backend kube-apiservers

backend kube-apiservers
CFG
	import_image "${root}" "${HAPROXY_IMAGE}" \
		'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		'ENTRYPOINT ["/usr/sbin/haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]'
fi
