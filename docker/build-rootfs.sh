#!/bin/sh
# The Dockerfile's build step: a static natsd and the image's files, laid out under $1 as the
# official nats scratch image lays them out (/nats-server, /nats-server.conf, and
# /etc/nats/nats-server.conf as in the alpine image), plus /natsd -> nats-server.
# packaging/packaging_test.go runs this same script, so the image's contents are tested where
# docker cannot run. Run from the repository root; VERSION and COMMIT are stamped when set.
set -eu
out=${1:?usage: docker/build-rootfs.sh OUTDIR}
pkg=github.com/natsd/natsd/server
ldflags="-s -w -X $pkg.Commit=${COMMIT:-}"
if [ -n "${VERSION:-}" ]; then
	ldflags="$ldflags -X $pkg.Version=$VERSION"
fi
mkdir -p "$out/etc/nats"
CGO_ENABLED=0 ${GO:-go} build -trimpath -ldflags "$ldflags" -o "$out/nats-server" .
ln -sf nats-server "$out/natsd"
cp docker/nats-server.conf "$out/nats-server.conf"
cp docker/nats-server.conf "$out/etc/nats/nats-server.conf"
